// Package network keeps the mesh's overlay: the address pool (network
// set, show, address), an address for each node as it enrols and back to
// the pool as it retires, and a drive that gives one to any active node
// without (a node enrolled before the network was set, or through a
// controller that had not folded it yet).
package network

import (
	"sync/atomic"

	"github.com/meshctl/mesh/commands/core"
)

// Service is the network's verbs over one Core.
type Service struct {
	*core.Core
	// addressSeen is the composition version at which no active node
	// lacked an overlay address (DriveNetwork).
	addressSeen atomic.Uint64
}

// New is the network's verbs over c.
func New(c *core.Core) *Service { return &Service{Core: c} }
