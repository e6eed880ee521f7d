// Package rollout moves a module's new build across the nodes in waves:
// it plans the waves (rollout plan), starts a rollout (by hand, or by
// itself for a module registered with an auto policy), and drives each
// one step at a time, every step a checked append, so several controllers
// drive the same rollouts and none takes a step twice. Whether a wave may
// go on, halts or reverts is decided in package aggregates (Gate,
// NextRolloutStep), as a pure function of what the read models hold.
package rollout

import (
	"context"
	"sync/atomic"

	"github.com/meshctl/mesh/commands/core"
	"github.com/meshctl/mesh/commands/world"
	"github.com/meshctl/mesh/compose"
	"github.com/meshctl/mesh/projections"
	"github.com/meshctl/mesh/wire"
)

// Pusher sends a wave's nodes their declarations and plans what a push
// would do to one node (package push).
type Pusher interface {
	Push(ctx context.Context, r wire.PushRequest) (wire.PushReply, error)
	Planned(ctx context.Context, row projections.Node, res compose.Result, detailed *int) (wire.PlannedNode, error)
}

// Stater answers the mesh's status (package status): a rollout shows the
// state of each node it moves.
type Stater interface {
	Status(ctx context.Context, r wire.StatusRequest) (wire.StatusReport, error)
}

// Service is the rollouts' verbs and drive over one Core.
type Service struct {
	*core.Core
	world  *world.Composer
	push   Pusher
	status Stater
	// autoSeen is the composition version at which no new build waited
	// for its auto rollout: a drive's tick reads no assignment until a
	// registration or an assignment moves it.
	autoSeen atomic.Uint64
}

// New is the rollouts over c, composing through w, sending through p and
// reading status through s.
func New(c *core.Core, w *world.Composer, p Pusher, s Stater) *Service {
	return &Service{Core: c, world: w, push: p, status: s}
}
