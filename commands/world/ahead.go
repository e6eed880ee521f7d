package world

import (
	"context"
	"time"
)

// KeepAhead composes every node again soon after composition moves (a
// label, an assignment, a node enrolled), settle after the commit that
// moved it, so that the status, push or page after a change finds it
// composed, as the one after a push does: at 100,000 nodes the first
// status after a label change spent 0.1-0.4 CPU s composing and, as often
// as not, a collection set off by what that allocated (issue 34's 300 ms
// bound), where a status with composition cached takes 0.08-0.15.
//
// Only while composition is asked for: after composing ahead it waits
// until a caller of ComposeAll asks again before it composes the next
// move, so a mesh nobody reads (a bulk enrolment, traffic) costs at most
// one composition no one used. It never hurries the fold (it waits on
// Commits, not WaitFor). stop ends it and waits for it.
func (h *Composer) KeepAhead(settle time.Duration) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-ctx.Done():
				return
			case <-h.Proj.Commits():
			}
			// A burst of commits (a push's, a bulk change) is looked at
			// once, after it.
			select {
			case <-ctx.Done():
				return
			case <-time.After(settle):
			}
			h.ahead()
		}
	}()
	return func() { cancel(); <-done }
}

// ahead composes every node at the read models' composition version when
// composition was asked for since it last did and the cache is not at
// that version. Its errors are the next caller's to meet and say.
func (h *Composer) ahead() {
	if !h.asked.Load() {
		return
	}
	if _, cached, err := h.cachedNow(); err != nil || cached {
		return
	}
	// Before composing: a caller asking meanwhile asks for the move after.
	h.asked.Store(false)
	_, _ = h.composeAll()
}
