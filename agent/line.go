package agent

import (
	"context"
	"errors"
	"sync"

	"github.com/nats-io/nats.go"
)

// errLineDropped is why a call to the bus in flight ended early: the
// agent's connection dropped under it. The request or publish went with
// the connection (a restarted server never answers it), and waiting out
// the call's whole timeout (5 s by default) kept the node behind after
// every bus restart for nothing: the reconnect already makes the agent
// read again, and a kept report is sent again.
var errLineDropped = errors.New("the connection to the bus dropped while the call was in flight")

// line ends the calls in flight each time the agent's connection drops.
// Only the bus's calls (a read of the newest declaration, a report) are
// reached by it: an apply or a program's start is the node's own work,
// and a bus restart must never cut it half way.
type line struct {
	mu  sync.Mutex
	end context.CancelCauseFunc // ends every call begun since the last drop
	cur context.Context
}

// watchLine makes the agent's line and follows nc's status until stop.
func (a *Agent) watchLine(nc *nats.Conn) (stop func()) {
	l := &line{}
	l.cur, l.end = context.WithCancelCause(context.Background())
	a.line.Store(l)
	// A status listener, not DisconnectedErrCB, which belongs to whoever
	// made the connection (the agent's command, the fleet harness).
	dropped := nc.StatusChanged(nats.DISCONNECTED, nats.RECONNECTING, nats.CLOSED)
	done := make(chan struct{})
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		for {
			select {
			case <-done:
				return
			case _, open := <-dropped:
				if !open {
					return
				}
				l.drop()
			}
		}
	}()
	return func() {
		// The goroutine first: removing the listener closes its channel,
		// which a loop still reading it would take for a drop at each turn.
		close(done)
		<-ended
		nc.RemoveStatusListener(dropped)
		a.line.Store(nil)
		l.drop()
	}
}

// drop ends the calls in flight and begins a new generation for the
// calls after it (made while the client reconnects, they are sent once
// it has, and answered).
func (l *line) drop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.end(errLineDropped)
	l.cur, l.end = context.WithCancelCause(context.Background())
}

// onLine answers ctx, ended too when the connection drops before the call
// it bounds returns. Outside Run (no line) it is ctx itself.
func (a *Agent) onLine(ctx context.Context) (context.Context, context.CancelFunc) {
	l := a.line.Load()
	if l == nil {
		return ctx, func() {}
	}
	l.mu.Lock()
	gen := l.cur
	l.mu.Unlock()
	ctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(gen, func() { cancel(context.Cause(gen)) })
	return ctx, func() { stop(); cancel(nil) }
}

// dropped says why a call on ctx (from onLine) failed with err: the drop,
// when that ended it, rather than a bare "context canceled".
func dropped(ctx context.Context, err error) error {
	if err != nil && errors.Is(context.Cause(ctx), errLineDropped) {
		return errLineDropped
	}
	return err
}
