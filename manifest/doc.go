// Package manifest is the module manifest format: a JSON file naming what a
// module requires of a machine, what it provides to and consumes from other
// modules, its settings, and its resources. Parse is strict (an unknown field,
// kind or malformed mode is refused with its name) and Canonical gives the one
// byte form whose sha256 is the module's build, so that the same content is
// the same build however its file was laid out.
//
// It imports only the standard library and events (for the name rule): no
// bus, no store. A registration event carries the canonical bytes themselves,
// so anyone can recompute a build from the log.
package manifest
