// Package push sends nodes their declarations: it composes each (through
// package world), numbers and signs it, and appends one DeclarationSent a
// node, in windows, so a push to a hundred thousand nodes holds a bounded
// part of them at once. It also answers what a push would do (plan, push
// --plan), which nodes a selector matches, and a declaration an operator
// writes by hand (declare). Rollouts, seats and rotations send through a
// *Service; none signs a declaration itself.
package push

import (
	"github.com/meshctl/mesh/commands/core"
	"github.com/meshctl/mesh/commands/world"
)

// Service is the push verbs over one Core and its composition.
type Service struct {
	*core.Core
	*world.Composer
}

// New is the push verbs over c, composing through w.
func New(c *core.Core, w *world.Composer) *Service { return &Service{Core: c, Composer: w} }
