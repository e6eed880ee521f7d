package projections

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/events/store"
)

// The live fold: catching up from the checkpoint, following the stream,
// and telling waiters what has been folded.

// Start begins folding from the checkpoint: catch up, then follow live.
func (e *Engine) Start() {
	e.runMu.Lock()
	defer e.runMu.Unlock()
	e.startLocked()
}

func (e *Engine) startLocked() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	e.runCancel, e.runDone = cancel, done
	e.mu.RLock()
	f := e.newFolder(e.db, e.committed)
	e.share(f)
	e.mu.RUnlock()
	f.snapshot = e.maybeSnapshot
	f.heard = e.o.Heard
	f.window, f.now, f.wake = e.window, e.now, e.wake
	f.wanted = e.wanted.Load
	// The first caught-up event after a start is inside the window too.
	f.lastCommit = f.now()
	var wg sync.WaitGroup
	if e.filling.CompareAndSwap(false, true) {
		// Once an engine: a restart of the fold finds it under way.
		e.fills.Go(e.fillHistory)
	}
	warm := e.warm.Swap(false)
	wg.Go(func() {
		// Read models just fetched from the bus: their tail is likely a
		// push's, touching every node (warm.go).
		whole := false
		if warm {
			var err error
			if whole, err = f.warm(); err != nil {
				e.o.Log.Warn("projections: cannot read the node rows ahead of the tail; folding it without", "err", err)
			}
		}
		f.fillAtStart(whole)
		e.follow(ctx, f)
	})
	wg.Go(func() { e.syncLoop(ctx) })
	go func() {
		wg.Wait()
		close(done)
	}()
}

// Refollow starts the live fold again from the checkpoint: after the bus's
// JetStream was started again (mesh up, on a disk with room again), whose
// consumers it forgot; the fold's own consumer would notice only when its
// heartbeats stop, some ten seconds later.
func (e *Engine) Refollow() {
	e.runMu.Lock()
	defer e.runMu.Unlock()
	if e.runCancel == nil {
		return
	}
	e.stopLocked()
	e.startLocked()
}

// syncInterval bounds how much folding a crash can undo. Commits do not
// fsync (a command must not wait for a disk), and Pebble keeps a NoSync
// commit in its WAL buffer until something syncs: without this loop a kill
// -9 would throw away everything folded since the last memtable flush.
// Nothing is lost either way (replay restores it); this keeps restarts short.
const syncInterval = 200 * time.Millisecond

func (e *Engine) syncLoop(ctx context.Context) {
	tick := time.NewTicker(syncInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if !e.unsynced.Swap(false) {
			continue
		}
		e.mu.RLock()
		err := e.db.LogData(nil, pebble.Sync)
		e.mu.RUnlock()
		if err != nil {
			e.o.Log.Warn("projections: cannot sync the read models' log", "err", err)
		}
	}
}

// Stop ends the live fold and leaves the read models readable as they
// are: a controller shutting down, as a command still in flight sees it.
func (e *Engine) Stop() {
	e.runMu.Lock()
	defer e.runMu.Unlock()
	e.stopLocked()
}

func (e *Engine) stopLocked() {
	if e.runCancel == nil {
		return
	}
	e.runCancel()
	<-e.runDone
	e.runCancel, e.runDone = nil, nil
}

// follow reads from the checkpoint on until ctx ends or the fold meets a
// newer controller's event. A read error (the bus went away) is retried; so
// is a failure to write the read models (a full disk): the same events are
// folded again from the checkpoint once they can be written, and the log
// says so when it starts and when it clears, not at every try. Only a
// newer controller's event stops the fold: it is the same event every
// time, and it waits for a person with a newer binary.
func (e *Engine) follow(ctx context.Context, f *folder) {
	defer f.discard()
	for {
		err := e.fold(ctx, store.ReadOptions{From: e.checkpoint.Load() + 1, Follow: true, Own: true, Wanted: e.wanted.Load, Asked: e.asked}, f)
		if ctx.Err() != nil {
			return
		}
		var fe *FoldError
		switch {
		case errors.As(err, &fe) && errors.Is(fe, events.ErrNewer):
			e.failure.Store(fe)
			e.o.Log.Error("projections stopped", "err", fe)
			e.broadcast()
			return
		case errors.As(err, &fe):
			if e.stalled.Swap(fe) == nil {
				e.o.Log.Error(fmt.Sprintf("projections cannot write the read models; folding again from event %d every second until they can: %v",
					e.checkpoint.Load()+1, fe))
			}
			f.reset()
		default:
			e.o.Log.Warn("projections: reading the stream failed; retrying", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

func (e *Engine) committed(last uint64) {
	e.commits.Add(1)
	e.unsynced.Store(true)
	e.checkpoint.Store(last)
	if s := e.stalled.Load(); s != nil && last >= s.Seq && e.stalled.CompareAndSwap(s, nil) {
		e.o.Log.Info("projections write again", "folded_past", s.Seq)
	}
	e.broadcast()
}

func (e *Engine) broadcast() {
	e.notifyMu.Lock()
	// Every waiter wakes, and one still waiting says again what for.
	e.wanted.Store(math.MaxUint64)
	close(e.notify)
	e.notify = make(chan struct{})
	e.notifyMu.Unlock()
}

// Checkpoint is the sequence of the last event folded and committed.
func (e *Engine) Checkpoint() uint64 { return e.checkpoint.Load() }

// Stalled is the storage fault the fold is retrying, if any.
func (e *Engine) Stalled() error {
	if f := e.stalled.Load(); f != nil {
		return f
	}
	return nil
}

// Failure is the event folding stopped at, if it stopped.
func (e *Engine) Failure() error {
	if f := e.failure.Load(); f != nil {
		return f
	}
	return nil
}

// WaitFor returns once the event at seq is folded, so a command that just
// appended reads its own write. It fails if folding stopped or ctx ends first.
func (e *Engine) WaitFor(ctx context.Context, seq uint64) error {
	for {
		// Checked under notifyMu, before saying what it waits for: a
		// waiter that is done leaves no wish behind to make the fold
		// commit the next event at once. A commit that reaches seq after
		// this check broadcasts after it, waking this waiter.
		e.notifyMu.Lock()
		ch := e.notify
		done := e.checkpoint.Load() >= seq
		if !done && seq < e.wanted.Load() {
			e.wanted.Store(seq)
		}
		e.notifyMu.Unlock()
		if done {
			return nil
		}
		if f := e.failure.Load(); f != nil {
			return f
		}
		// The live fold may hold seq applied but not committed: it
		// commits at once, knowing now that someone waits for it.
		select {
		case e.wake <- struct{}{}:
		default:
		}
		select {
		case e.asked <- struct{}{}:
		default:
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("projections: event %d is not folded yet (checkpoint %d): %w", seq, e.checkpoint.Load(), ctx.Err())
		}
	}
}
