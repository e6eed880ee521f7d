package core

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// ErrBusDown: the bus takes no events now (mesh up saw its disk fail a
// write, or its data directory removed), and why. A write is refused with
// it at once, and one in flight is cut with it, rather than waiting for an
// acknowledgement the bus will not give (issue 28: a push waited its whole
// five minutes though the controller knew at once).
var ErrBusDown = errors.New("the bus takes no events now")

// busTrouble is why the bus takes no events, while it does not. The zero
// value is a bus that takes them.
type busTrouble struct {
	mu  sync.Mutex
	err error
	// down is closed when err is set, so that every write in flight is
	// cut at once; a new one is made when the bus takes events again,
	// else a write begun after the recovery would be cut by the old fault.
	down chan struct{}
}

// SetBusTrouble says the bus takes no events now, and why (nil: it does
// again). mesh up, which owns its bus, watches it and says so
// (embedded.KeepStorage).
func (c *Core) SetBusTrouble(err error) {
	b := &c.bus
	b.mu.Lock()
	was := b.err
	b.err = err
	switch {
	case err != nil && was == nil:
		if b.down == nil {
			b.down = make(chan struct{})
		}
		close(b.down)
	case err == nil && was != nil:
		b.down = make(chan struct{})
	}
	b.mu.Unlock()
	if err == nil && was != nil {
		c.Proj.Refollow() // the bus's consumers were started again with it
	}
}

// trouble is why the bus takes no events now (nil: it does), and the
// channel closed when that next changes to a fault.
func (b *busTrouble) trouble() (error, <-chan struct{}) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.down == nil {
		b.down = make(chan struct{})
	}
	return b.err, b.down
}

// BusDown is the one sentence of a write the bus did not take because of
// cause: what it is, and that nothing of it is known to be recorded.
func BusDown(cause error) error {
	return fmt.Errorf("%w: %w", ErrBusDown, cause)
}

// CutOnTrouble is ctx, cut with the bus's trouble when mesh up says the bus
// stopped taking events: a write waiting on an acknowledgement returns
// then, not when its own timeout ends.
func (c *Core) CutOnTrouble(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(ctx)
	_, down := c.bus.trouble()
	// One goroutine per write, ended by the write's own end (cancel).
	go func() {
		select {
		case <-down:
			err, _ := c.bus.trouble()
			if err != nil {
				cancel(BusDown(err))
			}
		case <-ctx.Done():
		}
	}()
	return ctx, func() { cancel(nil) }
}

// CutBy is the bus trouble that cut ctx, nil when it was not cut by one.
func CutBy(ctx context.Context) error {
	if cause := context.Cause(ctx); errors.Is(cause, ErrBusDown) {
		return cause
	}
	return nil
}

// BusCause is the cause status names while the bus takes no events, or
// while the last write met a bus with no room (a JetStream limit, which
// mesh serve's cluster, not watched, also meets): "" when neither.
func (c *Core) BusCause() string {
	if err, _ := c.bus.trouble(); err != nil {
		return "writes are refused: " + BusDown(err).Error()
	}
	if c.storageFull.Load() {
		return "the last write was refused: the bus's storage is full or at its limit; free space on its disk or raise its JetStream storage limit"
	}
	return ""
}
