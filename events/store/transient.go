package store

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// On a cluster, some failures are of the moment, not of the request: a
// consumer just created on one server that another has not heard of yet
// ("no responders" for its first pull), a stream leader being elected, a
// direct get that reached a replica still catching up. A read, and a
// publish that reached no stream, may simply be tried again (issue 12:
// "assign failed 76 times with no responders" on an R3 cluster).

// transientFor bounds how long a read keeps trying through such faults: a
// leader election takes about a second.
const transientFor = 3 * time.Second

// transient reports whether err is a fault of the moment.
func transient(err error) bool {
	var apiErr *jetstream.APIError
	return errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrNoHeartbeat) ||
		errors.As(err, &apiErr) && apiErr.Code == 503 && apiErr.ErrorCode != codeInsufficient && apiErr.ErrorCode != codeStoreFailed
}

// retry runs fn until it succeeds, fails for good, or transientFor has
// passed, waiting a little longer each time.
func retry[T any](ctx context.Context, fn func() (T, error)) (T, error) {
	return retryFor(ctx, transientFor, fn)
}

// retryFor is retry bounded by d: a commit waits longer than a read (a
// publish that reached no stream landed nothing, and a push failing
// during a leader election costs an operator more than a wait).
func retryFor[T any](ctx context.Context, d time.Duration, fn func() (T, error)) (T, error) {
	deadline := time.Now().Add(d)
	wait := 20 * time.Millisecond
	for attempt := 0; ; attempt++ {
		v, err := fn()
		// A request's own timeout (not the caller's) is of the moment too:
		// a request sent while the meta leader was being elected.
		own := errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil
		// At least one more try, however long the first took.
		if err == nil || !transient(err) && !own || attempt > 0 && time.Now().Add(wait).After(deadline) {
			return v, err
		}
		select {
		case <-ctx.Done():
			return v, err
		case <-time.After(wait):
		}
		wait = min(2*wait, 400*time.Millisecond)
	}
}

// commitFor bounds how long a commit keeps trying through such faults:
// about the fifty tries of up to 400 ms it made before it used retry.
const commitFor = 20 * time.Second
