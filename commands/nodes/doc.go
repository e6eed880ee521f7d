// Package nodes keeps the mesh's nodes and what is assigned to them:
// enrol, retire, change a node's capabilities and labels, list them, and
// assign or unassign a module (one at a time, or many at once in one
// atomic batch). Each decides in package aggregates on what the read
// models hold (core.DecideAtomic); an enrolment takes its overlay address
// from package network and answers the node's token from package access.
package nodes

import (
	"context"
	"time"

	"github.com/meshctl/mesh/commands/core"
	"github.com/meshctl/mesh/commands/network"
	"github.com/meshctl/mesh/commands/world"
	"github.com/meshctl/mesh/wire"
)

// Tokens answers the token an enrolled node joins with (package access).
type Tokens interface {
	NodeToken(ctx context.Context, node string, rekey bool) (wire.Identity, error)
}

// Hearing says when a node's agent was last heard (package liveness).
type Hearing interface {
	LastHeard(node string) time.Time
}

// Service is the nodes' verbs over one Core.
type Service struct {
	*core.Core
	world   *world.Composer
	network *network.Service
	tokens  Tokens
	live    Hearing
}

// New is the nodes' verbs over c, resolving builds through w, addressing
// through n, answering tokens through t and last-heard times through l.
func New(c *core.Core, w *world.Composer, n *network.Service, t Tokens, l Hearing) *Service {
	return &Service{Core: c, world: w, network: n, tokens: t, live: l}
}
