// Package access decides who may be on the bus and what each may write:
// the enrolment tokens and a node's enrolment with its own keys (tokens,
// enrol, join, rekey), what the bus's auth callout asks of the read models
// (Directory), the ending of connections whose grant the log took away
// (grants.go), a node that floods its report subjects cut and refused for
// a cool-down (flood.go), and the foreign messages the fold set aside
// (foreign list, foreign ack).
package access

import (
	"strings"

	"github.com/meshctl/mesh/busauth"
	"github.com/meshctl/mesh/commands/core"
	"github.com/meshctl/mesh/commands/network"
	"github.com/meshctl/mesh/commands/world"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
)

// Service is the access verbs over one Core.
type Service struct {
	*core.Core
	// network gives an enrolling node its overlay address.
	network *network.Service
	// world reads the manifests of the modules a connection runs.
	world *world.Composer
	// flood counts what each node writes on its report subjects (nil for
	// the past); cutUsers drops the connections of the users it matches on
	// a bus the controller runs (nil: a cluster's, which it cannot).
	flood    *FloodWatch
	cutUsers func(match func(user string) bool) (int, error)
	// cutter ends live connections whose grant the log took away (nil on
	// an open bus, which grants nothing: grants.go).
	cutter *busauth.Cutter
}

// New is the access verbs over c, reading manifests through w and
// addressing through n. flood (nil: none
// is counted) acts through the service from now on.
func New(c *core.Core, w *world.Composer, n *network.Service, flood *FloodWatch, cut func(match func(user string) bool) (int, error)) *Service {
	h := &Service{Core: c, world: w, network: n, flood: flood, cutUsers: cut}
	if flood != nil {
		flood.mu.Lock()
		flood.act = h.flooded
		flood.mu.Unlock()
	}
	return h
}

// Directory is what the bus's auth callout asks of the read models.
func (h *Service) Directory() busauth.Directory { return directory{h} }

// Guard, on a closed bus, dials a cutter as the controller (kp) and ends
// every connection whose grant the log takes away from now on, and those
// open now that hold one it took away already, until stopped.
func (h *Service) Guard(nc *nats.Conn, kp nkeys.KeyPair) (stop func(), err error) {
	if h.cutter, err = busauth.DialCutter(nc, kp); err != nil {
		return nil, err
	}
	stopFollowing, err := h.followGrants()
	if err != nil {
		h.cutter.Close()
		return nil, err
	}
	return func() { stopFollowing(); h.cutter.Close() }, nil
}

// cutsNode is whether user is node's identity or one of its modules'
// (NODE/MODULE: their standings are on its subjects too).
func cutsNode(node string) func(user string) bool {
	return func(user string) bool { return user == node || strings.HasPrefix(user, node+"/") }
}
