package core

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/meshctl/mesh/aggregates"
	"github.com/meshctl/mesh/events/store"
)

// decideAttempts bounds how often one command decides again because another
// write to what it changes landed between its read and its append. It is
// one bound for every decision: two controllers enrolling at full speed
// both write the address pool and part only after a few dozen rounds (the
// random pauses below), so a smaller bound refused enrolments that would
// have landed; a larger one only makes a decision that can never land (a
// read model whose version does not follow the log) take longer to say so.
const decideAttempts = 64

// DecideAndAppend is the one decide-and-append loop: round reads what the
// command changes (the read models or the aggregate's own events), decides,
// and appends expecting the version it read; the store refuses the append
// with store.ErrConflict when another write landed since, and nothing of it
// is recorded. Then it pauses a random while and calls reread (when not
// nil: c.CatchUp, so the next round decides on read models that hold the
// write that won), and runs round again, with its attempt number (0 first).
// Any other answer of round, nil or an error, is the answer.
//
// What breaks if it changes:
//   - Without the pause, two controllers that conflicted decide again at the
//     same moment and conflict again, round after round, until the bound.
//   - Without reread, a round that decides on read models reads the same
//     stale version and conflicts every time; it is nil only for a round
//     that reads the log itself (store.Load, store.Version), or catches up
//     itself at a point of its own choosing (Rotate reads a version first).
//   - A round must keep nothing of an attempt that conflicted (the store
//     recorded none of it): what it returns to its caller it sets anew
//     each attempt. Push alone keeps what a round did send, as its
//     appends land node by node, and composes only the rest again.
//   - Only store.ErrConflict decides again: a refusal, or nothing to do,
//     is the answer as the round made it, its kind unchanged.
//
// After decideAttempts conflicts in a row it answers contended(op, id).
func DecideAndAppend(ctx context.Context, op, id string, reread func(context.Context) error, round func(attempt int) error) error {
	for attempt := range decideAttempts {
		if attempt > 0 {
			if err := pause(ctx, attempt); err != nil {
				return err
			}
			if reread != nil {
				if err := reread(ctx); err != nil {
					return err
				}
			}
		}
		if err := round(attempt); !errors.Is(err, store.ErrConflict) {
			return err
		}
	}
	return contended(op, id)
}

// pause waits a random while before attempt, up to 1ms after the first
// conflict and doubling to 32ms: random, so that two writers who conflicted
// part rather than meet again; growing, so that many part too; short, as a
// conflict means the other write has landed and there is no one to wait for.
// A cancelled ctx ends it.
func pause(ctx context.Context, attempt int) error {
	t := time.NewTimer(time.Duration(rand.Int64N(int64(time.Millisecond) << min(attempt-1, 5))))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// contended is the one sentence for a decision other writes kept moving:
// "cannot <op> <id>: ...". It is a refusal of kind ErrContended, so it
// crosses the bus as that kind and the command line exits on it as on any
// refusal. It names the remedy for both causes: writers that are really
// busy (try again once they stop), and a controller that misreads what it
// changes, for which trying again never helps (a many-use token's version
// that did not move with its uses was one).
func contended(op, id string) error {
	return aggregates.Refuse(op, id, aggregates.ErrContended, fmt.Sprintf(
		"other writes moved it %d times in a row while this command decided, so nothing was recorded; "+
			"if others are changing it (mesh events shows them), run this again once they stop; "+
			"if nothing else is, trying again will not help: the controller misreads it, so run mesh projections verify and report this",
		decideAttempts))
}
