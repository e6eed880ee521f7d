package aggregates

import (
	"errors"
	"fmt"
)

// Refusals. Each is wrapped in an *Error that names the command and the thing.
var (
	ErrNameTaken     = errors.New("the name is taken")
	ErrUnknownNode   = errors.New("no such node")
	ErrRetired       = errors.New("the node is retired")
	ErrUnknownModule = errors.New("no such module")
	ErrInvalid       = errors.New("invalid command")
	// ErrUncomposable: an act that must reach several nodes together
	// (rule 7) found one it cannot compose, and did nothing.
	ErrUncomposable = errors.New("a node it must reach cannot be composed")
	// ErrContended: other writes moved what a command changes every time
	// it decided, up to its bound, and nothing was recorded (commands'
	// decideAndAppend says the one sentence for it).
	ErrContended = errors.New("other writes kept moving what it changes")
	// ErrUnknown: what a command names by its number (a foreign message's
	// stream sequence, a rollout's id) is no such thing: a refusal (exit
	// 1), as an unknown node is, not a request not understood.
	ErrUnknown = errors.New("no such thing")
	// ErrInUse: what a command would take away is in force somewhere (an
	// artifact a node's last declaration installs), and nothing changed.
	ErrInUse = errors.New("it is in use")
	// ErrForbidden: the operator who asked has a role that does not allow
	// the verb (issue 33); the sentence names the role that would.
	ErrForbidden = errors.New("the caller's role does not allow it")
	// ErrNotYet: what was asked for is on its way but not here yet (the
	// history index of a controller that started from a brief snapshot
	// and is still fetching it); the sentence says when to ask again.
	ErrNotYet = errors.New("it is not ready yet")
)

// Error is a refusal by an aggregate: Op is the command ("enroll"), ID the
// thing it was about, Err the sentinel, Detail the sentence for a person.
type Error struct {
	Op     string
	ID     string
	Err    error
	Detail string
}

func (e *Error) Error() string {
	return fmt.Sprintf("cannot %s %s: %s", e.Op, e.ID, e.Detail)
}

func (e *Error) Unwrap() error { return e.Err }

// Refuse is the one way a refusal is made, in every layer: the command
// (op), the thing it was about, its kind (one of the sentinels above, which
// survives the bus: see Kind), and the sentence for a person, which names
// the remedy.
func Refuse(op, id string, kind error, detail string) *Error {
	return &Error{Op: op, ID: id, Err: kind, Detail: detail}
}

func refuse(op, id string, err error, format string, args ...any) error {
	return Refuse(op, id, err, fmt.Sprintf(format, args...))
}

// kinds names each refusal kind as it travels on the bus (a header of the
// answer), so the client's error is of the same kind as the controller's.
var kinds = map[string]error{
	"name-taken": ErrNameTaken, "unknown-node": ErrUnknownNode, "retired": ErrRetired,
	"unknown-module": ErrUnknownModule, "invalid": ErrInvalid, "uncomposable": ErrUncomposable,
	"contended": ErrContended, "unknown": ErrUnknown, "in-use": ErrInUse, "forbidden": ErrForbidden,
	"not-yet": ErrNotYet,
}

// Kind names err's refusal kind ("" when it is not a refusal).
func Kind(err error) string {
	for name, k := range kinds {
		if errors.Is(err, k) {
			return name
		}
	}
	return ""
}

// KindNamed is the refusal kind of a name Kind gave (nil for none).
func KindNamed(name string) error { return kinds[name] }
