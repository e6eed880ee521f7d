package core

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/projections"
	"github.com/meshctl/mesh/wire"
)

// ErrNotFolded: an event landed, but the read models have not folded it in
// the time the command had. The change is recorded; what is unconfirmed is
// only that the controller has caught up with it.
var ErrNotFolded = errors.New("the change landed but is not folded yet")

// Writable refuses a write while the fold is stopped (rule 19: a newer
// controller's event, or a failing disk), with the one sentence that says why.
func (c *Core) Writable() error {
	if err, _ := c.bus.trouble(); err != nil {
		return BusDown(err)
	}
	var fe *projections.FoldError
	if errors.As(c.Proj.Failure(), &fe) {
		return Refusal(fe)
	}
	return nil
}

// Refusal is why a controller whose fold stopped at fe refuses writes.
func Refusal(fe *projections.FoldError) error {
	var newer *events.NewerError
	if errors.As(fe, &newer) {
		return fmt.Errorf("%w: this controller is older than the log: event %d is a %s it does not know; upgrade it",
			wire.ErrReadOnly, fe.Seq, newer.Decode.Type)
	}
	return fmt.Errorf("%w: its read models stopped at event %d (%v); see mesh projections status", wire.ErrReadOnly, fe.Seq, fe.Err)
}

// Landed waits for the fold of what a command appended (up to seq) and,
// when it cannot confirm it, says what landed rather than failing as if
// nothing happened (issue 11, part 8): an operator who retries a command
// that did act must know it did.
func (c *Core) Landed(ctx context.Context, seq uint64, what ...events.Event) error {
	err := c.Proj.WaitFor(ctx, seq)
	if err == nil {
		return nil
	}
	names := make([]string, len(what))
	for i, ev := range what {
		names[i] = ev.EventType()
	}
	return fmt.Errorf("%w: %s landed at event %d, but the read models have not folded it (%v); it is recorded, and mesh status says when the controller has caught up",
		ErrNotFolded, strings.Join(names, ", "), seq, err)
}
