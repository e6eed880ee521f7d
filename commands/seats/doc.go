// Package seats keeps the seats: a module that may run on one node at a
// time takes its seat when assigned, and a handover moves it in steps
// (the holder is sent a declaration without it and applies it, then the
// new holder is sent one with it), each step a checked append, so two
// controllers never take one twice. Assigning claims and retiring releases
// through core.ClaimItems and core.ReleaseItems.
package seats

import (
	"context"
	"time"

	"github.com/meshctl/mesh/commands/core"
	"github.com/meshctl/mesh/commands/world"
	"github.com/meshctl/mesh/compose"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/projections"
	"github.com/meshctl/mesh/wire"
)

// Pusher sends and signs declarations (package push).
type Pusher interface {
	Push(ctx context.Context, r wire.PushRequest) (wire.PushReply, error)
	Seal(content compose.Declaration, row projections.Node, by string, at time.Time) (events.DeclarationSent, string)
}

// Service is the seats' verbs over one Core.
type Service struct {
	*core.Core
	world *world.Composer
	push  Pusher
}

// New is the seats' verbs over c, composing through w and sending through p.
func New(c *core.Core, w *world.Composer, p Pusher) *Service {
	return &Service{Core: c, world: w, push: p}
}
