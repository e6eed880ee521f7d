package commands

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/meshctl/mesh/events/store"
	"github.com/nats-io/nats.go"
)

// DefaultStartWait is how long a start keeps asking a bus that does not
// answer its lookup of the stream, when --timeout does not say. A bus
// holding a large stream can take longer than one call's bound
// (store.CallTimeout) to answer its first requests after a rest: a start
// against a 16 GB stream once failed outright on its first lookup
// ("cannot look up stream MESH: context deadline exceeded"), where asking
// again would have served. A minute is within what a service manager
// waits for a start (systemd's default is 90 s).
const DefaultStartWait = time.Minute

// untilAnswered runs look, the start's first calls on the bus, again each
// time the bus does not answer within a try's bound, until it answers
// (with the stream, or a refusal, which is returned as it is) or the
// start's wait is spent. Only silence is asked again: every answer,
// including "no such stream", is the bus's word and is acted on at once.
func untilAnswered(ctx context.Context, c ControllerConfig, look func(context.Context) error) error {
	wait := cmp.Or(c.StartWait, DefaultStartWait)
	// A try is bounded by one call's bound, and by a quarter of the wait,
	// so that a short wait is still asked more than once.
	try := min(store.CallTimeout, wait/4)
	for tries := 1; ; tries++ {
		tctx, cancel := context.WithTimeout(ctx, try)
		err := look(tctx)
		cancel()
		if err == nil || !unanswered(err) || ctx.Err() != nil {
			return err
		}
		// Each try asked again took its whole bound (the bus was
		// silent), so the wait is counted in tries, not read from a
		// clock a test may hold still.
		if time.Duration(tries+1)*try > wait {
			return fmt.Errorf("the bus did not answer the controller's lookup of its stream within %s (asked %d time(s), %s each); check that the bus is up and not overloaded (nats server check jetstream), or give a longer --timeout: %w",
				wait, tries, try, err)
		}
		c.Log.Warn("the bus did not answer the lookup of the stream; asking again", "try", tries, "bound", try.String(), "wait", wait.String())
	}
}

// unanswered reports whether err is the bus's silence: a call whose
// answer did not come within its bound.
func unanswered(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout)
}
