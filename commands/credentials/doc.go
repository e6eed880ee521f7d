// Package credentials keeps a mesh's secret material over time: rotating
// the credentials a provider mints for its consumers (rotate, all or
// nothing: aggregates.DecideRotation), forgetting a secret setting for
// good (secret forget, which erases its salt), and handing an agent the
// content keys of its files that printed secret settings, sealed to it.
package credentials

import (
	"time"

	"github.com/meshctl/mesh/commands/core"
	"github.com/meshctl/mesh/commands/world"
	"github.com/meshctl/mesh/compose"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/projections"
)

// Sealer numbers and signs a node's next declaration (package push).
type Sealer interface {
	Seal(content compose.Declaration, row projections.Node, by string, at time.Time) (events.DeclarationSent, string)
}

// Service is the credentials' verbs over one Core.
type Service struct {
	*core.Core
	world  *world.Composer
	sealer Sealer
}

// New is the credentials' verbs over c, composing through w and signing
// through s.
func New(c *core.Core, w *world.Composer, s Sealer) *Service {
	return &Service{Core: c, world: w, sealer: s}
}
