package store

import (
	"context"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// CallTimeout bounds one wait on the bus: a request and its answer, a
// publish and its acknowledgement, one reply of a batched read (rule 26).
// A bus killed with a request in flight never answers it, and a wait on a
// context without a deadline then lasts for ever: 164 of 300 agents
// following a restarted mesh up sat connected in such a read and never
// applied again. It is the one default of the mesh's bus calls; a caller
// that can wait longer (a command's --timeout) tries again within its own.
// Far above a round trip on a loaded box (milliseconds), below what a
// person waits before thinking something hangs.
const CallTimeout = 5 * time.Second

// Bound gives ctx a deadline for one call on the bus: CallTimeout from now,
// or ctx's own if that comes first. Every raw request of the mesh's goes
// through it; the JetStream API's calls have the same bound from newJS.
func Bound(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, CallTimeout)
}

// bound is Bound with the store's own Timeout where one is set.
func (s *Store) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	if s.Timeout > 0 {
		return context.WithTimeout(ctx, s.Timeout)
	}
	return Bound(ctx)
}

// newJS is the JetStream context of every store: a call given a context
// without a deadline waits CallTimeout (the library's own default is the
// same today; saying it here keeps it the mesh's, whatever the library
// does), and a pipelined publish whose ack never comes is settled after
// asyncAckWait.
func newJS(nc *nats.Conn, opts ...jetstream.JetStreamOpt) (jetstream.JetStream, error) {
	return jetstream.New(nc, append([]jetstream.JetStreamOpt{jetstream.WithDefaultTimeout(CallTimeout), jetstream.WithPublishAsyncTimeout(asyncAckWait)}, opts...)...)
}
