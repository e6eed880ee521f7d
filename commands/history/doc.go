// Package history answers what each node was told and when (history,
// history --diff) from the read models' index of declarations, reading the
// log itself only for the declarations shown; and audits the whole log
// (audit): every declaration's signature under the key in force, every
// node's numbering unbroken, every agent's report signed by its key.
package history

import "github.com/meshctl/mesh/commands/core"

// Service is history and audit over one Core.
type Service struct{ *core.Core }

// New is history and audit over c.
func New(c *core.Core) *Service { return &Service{Core: c} }
