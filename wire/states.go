package wire

// State is the one state status gives each active node (rule 10). Every
// state is a constant of this type and a key of stateWell (below), which
// TestEveryStateIsHandled holds every constant to. They are here, not in
// commands, because the command line reads them to print status.
type State string

// Node states (rule 10): exactly one per active node.
const (
	StateCurrent       State = "current"
	StateWaiting       State = "waiting"
	StateFailed        State = "failed"
	StateRefused       State = "refused"
	StateBehind        State = "behind"
	StateNeverSent     State = "never sent"
	StateCannotCompose State = "cannot be composed"
	// StateDrifted: what it applied was changed behind its agent's back,
	// and the agent (--drift report) left it as found. The next apply
	// ends it; push --behind sends one.
	StateDrifted State = "drifted"
)

// StatePartial: the node is current with what could be composed for it, but
// a module assigned to it was left out (its machine lacks a capability), so
// what was asked is not what runs.
const StatePartial State = "partial"

// StateHeld: the node is current with what it was sent, and a newer build
// of a module it holds waits, by its upgrade policy or for its wave of a
// rollout (rule 23). Said with why, so a held node is never mistaken for
// one a push forgot; the mesh is well with held nodes, which are where
// the operator chose to keep them.
const StateHeld State = "held"

// stateWell is every state, and whether a node in it leaves the mesh
// well: the one place a new state must be said to be one or the other.
var stateWell = map[State]bool{
	StateCurrent: true, StateHeld: true,
	StatePartial: false, StateDrifted: false, StateWaiting: false, StateFailed: false, StateRefused: false,
	StateBehind: false, StateNeverSent: false, StateCannotCompose: false, StateUnreachable: false,
}

// WellState says whether a node's state leaves the mesh well.
func WellState(state State) bool { return stateWell[state] }

// States are every state a node can be in, in the order status lists
// them (metrics export each, zero or not).
var States = []State{StateCurrent, StateHeld, StatePartial, StateDrifted, StateWaiting, StateFailed, StateRefused,
	StateBehind, StateNeverSent, StateCannotCompose, StateUnreachable}

// StateUnreachable: the node's agent has not been heard within the bound
// (mesh up --unreachable-after). What it last reported may no longer be
// true of it; it is not well until heard again.
const StateUnreachable State = "unreachable"

// RuntimeUnreachable is how status shows a program on an unreachable
// node: its agent cannot say whether it runs.
const RuntimeUnreachable = "unknown"
