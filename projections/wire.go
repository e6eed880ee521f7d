package projections

import "github.com/meshctl/mesh/wire"

// The rows that answers carry whole are declared in wire, so that a client
// decodes them without linking Pebble; these aliases keep their names here,
// where they are folded.
type (
	Status         = wire.StatusReply
	ForeignMessage = wire.ForeignMessage
	AddressRow     = wire.AddressRow
	Token          = wire.Token
	Rollout        = wire.Rollout
	Runtime        = wire.Runtime
	Seat           = wire.Seat
	Sent           = wire.Sent
	Report         = wire.Report
)

// Rollout states.
const (
	RolloutRunning  = wire.RolloutRunning
	RolloutPaused   = wire.RolloutPaused
	RolloutHalted   = wire.RolloutHalted
	RolloutAborted  = wire.RolloutAborted
	RolloutFinished = wire.RolloutFinished
)

// Runtime states: what a node's agent last said of a module's program.
const (
	RuntimeRunning      = wire.RuntimeRunning
	RuntimeExited       = wire.RuntimeExited
	RuntimeCrashLooping = wire.RuntimeCrashLooping
)
