package commands

import (
	"context"

	"github.com/meshctl/mesh/busauth"
	"github.com/meshctl/mesh/commands/access"
	"github.com/meshctl/mesh/commands/artifacts"
	"github.com/meshctl/mesh/commands/core"
	"github.com/meshctl/mesh/commands/credentials"
	"github.com/meshctl/mesh/commands/history"
	"github.com/meshctl/mesh/commands/liveness"
	"github.com/meshctl/mesh/commands/modules"
	"github.com/meshctl/mesh/commands/network"
	"github.com/meshctl/mesh/commands/nodes"
	"github.com/meshctl/mesh/commands/operators"
	"github.com/meshctl/mesh/commands/push"
	"github.com/meshctl/mesh/commands/reconcile"
	"github.com/meshctl/mesh/commands/rollout"
	"github.com/meshctl/mesh/commands/seats"
	"github.com/meshctl/mesh/commands/status"
	"github.com/meshctl/mesh/commands/world"
	"github.com/meshctl/mesh/wire"
)

// Services are the controller's verbs, each a service over one Core named
// for its noun. None holds another whole: each reads the others through
// the narrow interface its package declares (push's Sealer for
// credentials, rollout's Pusher and Stater, nodes' Tokens and Hearing),
// and this is the one place that hands each what it reads through.
type Services struct {
	// Core is what the controller is and the read models it answers from;
	// every service shares it, so its clock (Core.Now) is theirs.
	Core        *core.Core
	World       *world.Composer
	Push        *push.Service
	Live        *liveness.Service
	History     *history.Service
	Credentials *credentials.Service
	Network     *network.Service
	Seats       *seats.Service
	Status      *status.Service
	Rollouts    *rollout.Service
	Access      *access.Service
	Nodes       *nodes.Service
	Modules     *modules.Service
	// Operators are who may call which verb (issue 33); every endpoint
	// asks it of its caller.
	Operators *operators.Service
	// Reconcile sends behind nodes by itself once started (rule 27).
	Reconcile *reconcile.Service
	Artifacts *artifacts.Service
	// inflight is the requests this controller's endpoints took and have
	// not answered, and those it answered last (wire.Inflight).
	inflight wire.Inflight
}

// NewServices are the verbs over c, every cache empty, counting floods with
// flood and cutting with cut (both nil: neither, as for a test's services).
func NewServices(c *core.Core, flood *access.FloodWatch, cut func(match func(user string) bool) (int, error)) *Services {
	w := world.New(c)
	s := &Services{Core: c, World: w, Push: push.New(c, w), Live: liveness.New(c), History: history.New(c), Network: network.New(c)}
	s.Credentials = credentials.New(c, w, s.Push)
	s.Seats = seats.New(c, w, s.Push)
	s.Status = status.New(c, w, s.Live, s.Push)
	s.Rollouts = rollout.New(c, w, s.Push, s.Status)
	s.Access = access.New(c, w, s.Network, flood, cut)
	s.Nodes = nodes.New(c, w, s.Network, s.Access, s.Live)
	s.Modules = modules.New(c, w)
	s.Artifacts = artifacts.New(c, s.Push)
	s.Reconcile = reconcile.New(c, w, s.Push)
	s.Operators = operators.New(c, func(ctx context.Context, name string) (int, error) {
		return s.Access.CutUsers(ctx, busauth.OperatorUser(name))
	})
	s.Status.Reconciler = s.Reconcile
	return s
}
