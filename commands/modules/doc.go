// Package modules keeps the catalogue: a module's builds registered (each
// a digest of its manifest, so registering the same again is nothing to
// do), listed and shown, and the streams a module needs on the bus made
// when it is registered or the controller starts: a state bucket for one
// that runs a program, a work queue for a seat it claims.
package modules

import (
	"github.com/meshctl/mesh/commands/core"
	"github.com/meshctl/mesh/commands/world"
)

// Service is the catalogue's verbs over one Core.
type Service struct {
	*core.Core
	world *world.Composer
}

// New is the catalogue over c, reading manifests through w.
func New(c *core.Core, w *world.Composer) *Service { return &Service{Core: c, world: w} }
