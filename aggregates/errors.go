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

func refuse(op, id string, err error, format string, args ...any) error {
	return &Error{Op: op, ID: id, Err: err, Detail: fmt.Sprintf(format, args...)}
}
