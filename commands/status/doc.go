// Package status answers what the mesh is now: a state for every active
// node (verdict.StateOf over what it would be sent and what it last said),
// the causes that keep the mesh from well (health.go), one node's whole
// picture (node show), and where the read models stand (projections
// status, rebuild, verify); any of it as of a moment in the past, over a
// fold of the log up to then. It also records what providers say of their
// consumers (Report) and judges an agent's report for a waiter (Judge).
package status

import (
	"github.com/meshctl/mesh/commands/core"
	"github.com/meshctl/mesh/commands/liveness"
	"github.com/meshctl/mesh/commands/push"
	"github.com/meshctl/mesh/commands/world"
	"github.com/meshctl/mesh/wire"
)

// Service is the status verbs over one Core.
type Service struct {
	*core.Core
	world *world.Composer
	live  *liveness.Service
	// push scopes a status to a selector the way a push would.
	push *push.Service
	held heldCache
	// Reconciler, when set, says what the reconciler is doing (package
	// reconcile); nil, or an answer of nil, says nothing: it is off.
	Reconciler Reconciling
}

// Reconciling is what status reads of the reconciler.
type Reconciling interface {
	Reconciling() *wire.ReconcilerStatus
}

// New is the status verbs over c, composing through w, hearing through l
// and scoping through p.
func New(c *core.Core, w *world.Composer, l *liveness.Service, p *push.Service) *Service {
	return &Service{Core: c, world: w, live: l, push: p}
}

// Over is the status verbs over c alone, with services of their own (and
// so empty caches), as the past's and a test's are.
func Over(c *core.Core) *Service {
	w := world.New(c)
	return New(c, w, liveness.New(c), push.New(c, w))
}
