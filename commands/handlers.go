package commands

import (
	"github.com/meshctl/mesh/commands/access"
	"github.com/meshctl/mesh/commands/core"
	"github.com/meshctl/mesh/commands/credentials"
	"github.com/meshctl/mesh/commands/history"
	"github.com/meshctl/mesh/commands/liveness"
	"github.com/meshctl/mesh/commands/modules"
	"github.com/meshctl/mesh/commands/network"
	"github.com/meshctl/mesh/commands/nodes"
	"github.com/meshctl/mesh/commands/push"
	"github.com/meshctl/mesh/commands/rollout"
	"github.com/meshctl/mesh/commands/seats"
	"github.com/meshctl/mesh/commands/status"
	"github.com/meshctl/mesh/commands/world"
)

// newHandlers are the verbs over c, every cache empty.
func newHandlers(c *core.Core) *Handlers { return newHandlersFlooding(c, nil, nil) }

// newHandlersFlooding are the verbs over c, counting floods with flood
// and cutting with cut (both nil: neither).
func newHandlersFlooding(c *core.Core, flood *access.FloodWatch, cut func(match func(user string) bool) (int, error)) *Handlers {
	w := world.New(c)
	h := &Handlers{Core: c, Composer: w, pushVerbs: push.New(c, w), liveVerbs: liveness.New(c), historyVerbs: history.New(c)}
	h.credentialVerbs = credentials.New(c, w, h.pushVerbs)
	h.networkVerbs = network.New(c)
	h.seatVerbs = seats.New(c, w, h.pushVerbs)
	h.statusVerbs = status.New(c, w, h.liveVerbs, h.pushVerbs)
	h.rolloutVerbs = rollout.New(c, w, h.pushVerbs, h.statusVerbs)
	h.accessVerbs = access.New(c, w, h.networkVerbs, flood, cut)
	h.nodeVerbs = nodes.New(c, w, h.networkVerbs, h.accessVerbs, h.liveVerbs)
	h.moduleVerbs = modules.New(c, w)
	return h
}

// The services Handlers embeds while the verbs move into packages of
// their own (issue 30), named so that their field names differ.
type (
	pushVerbs       = push.Service
	liveVerbs       = liveness.Service
	historyVerbs    = history.Service
	credentialVerbs = credentials.Service
	networkVerbs    = network.Service
	seatVerbs       = seats.Service
	statusVerbs     = status.Service
	rolloutVerbs    = rollout.Service
	accessVerbs     = access.Service
	nodeVerbs       = nodes.Service
	moduleVerbs     = modules.Service
)

// Handlers are the verbs, bound to one store and one set of read models.
type Handlers struct {
	*core.Core
	*world.Composer
	*pushVerbs
	*liveVerbs
	*historyVerbs
	*credentialVerbs
	*networkVerbs
	*seatVerbs
	*statusVerbs
	*rolloutVerbs
	*accessVerbs
	*nodeVerbs
	*moduleVerbs
}
