package projections

import (
	"context"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/meshctl/mesh/events/store"
	"github.com/meshctl/mesh/projections/disk"
)

// Progress is reported after each commit of a rebuild.
type Progress struct {
	Folded, Total uint64
	Elapsed       time.Duration
}

// Rebuilt says what a rebuild did.
type Rebuilt struct {
	From, To   string // generations
	Events     uint64
	Checkpoint uint64
	Elapsed    time.Duration
}

// Rebuild folds the whole stream into a fresh generation while the current
// one keeps serving, then swaps it in. A fold error abandons the new
// generation and leaves the current one serving.
func (e *Engine) Rebuild(ctx context.Context, progress func(Progress)) (Rebuilt, error) {
	ctx, done := e.long(ctx)
	defer done()
	e.mu.RLock()
	from, closed := e.gen, e.db == nil
	e.mu.RUnlock()
	if closed {
		// Its cache, which the new generation would open with
		// (pebbleOptions), may be freed. Open, it is not freed while this
		// runs: Close waits for longMu.
		return Rebuilt{}, errClosed
	}
	start := time.Now()
	st, err := e.o.Store.State(ctx)
	if err != nil {
		return Rebuilt{}, err
	}
	next := disk.GenerationName(disk.GenerationNumber(from) + 1)
	path := e.fs.PathJoin(e.o.Dir, next)
	// A directory left by an abandoned rebuild is not to be trusted.
	if err := e.fs.RemoveAll(path); err != nil {
		return Rebuilt{}, fmt.Errorf("projections: cannot clear %s: %w", path, err)
	}
	db, err := e.openGenerationWith(next, st, e.pebbleOptions(true))
	if err != nil {
		return Rebuilt{}, err
	}
	abandon := func(err error) (Rebuilt, error) {
		if db != nil {
			db.Close()
		}
		e.fs.RemoveAll(path)
		return Rebuilt{}, err
	}
	f := e.newFolder(db, func(last uint64) {
		if progress != nil {
			progress(Progress{Folded: last, Total: st.LastSeq, Elapsed: time.Since(start)})
		}
	})
	if err := e.fold(ctx, store.ReadOptions{From: 1}, f); err != nil {
		f.discard()
		return abandon(err)
	}

	// Swap: stop the live fold, bring the new generation level with the
	// stream, and replace the old one under the write lock.
	e.runMu.Lock()
	defer e.runMu.Unlock()
	running := e.runCancel != nil
	e.stopLocked()
	restart := func() {
		if running {
			e.startLocked()
		}
	}
	if err := e.fold(ctx, store.ReadOptions{From: f.last + 1}, f); err != nil {
		f.discard()
		restart()
		return abandon(err)
	}
	f.discard()
	// The stream went on while it was read: what was folded is in it, so
	// the check that read models are not ahead of the stream is made
	// against at least that. With the state of the start alone, an event
	// appended during the rebuild failed it ("ahead of the stream").
	st.LastSeq = max(st.LastSeq, f.last)
	if db, err = e.seal(db, next, st); err != nil {
		restart()
		return abandon(err)
	}
	if err := e.dir().SetCurrent(next); err != nil {
		restart()
		return abandon(err)
	}
	e.mu.Lock()
	old := e.db
	e.db, e.gen = db, next
	e.checkpoint.Store(readCheckpoint(db))
	e.failure.Store(nil)
	e.mu.Unlock()
	old.Close()
	if err := e.fs.RemoveAll(e.fs.PathJoin(e.o.Dir, from)); err != nil {
		e.o.Log.Warn("projections: cannot remove the replaced generation", "dir", from, "err", err)
	}
	restart()
	e.broadcast()
	return Rebuilt{From: from, To: next, Events: st.Msgs, Checkpoint: e.checkpoint.Load(), Elapsed: time.Since(start)}, nil
}

// seal makes a rebuilt generation durable before CURRENT names it: folded
// without a WAL, it is durable only once its memtables are flushed. It is
// then opened again as every generation is, with a WAL, to serve. db is
// closed whatever happens; on an error the answer is nil.
func (e *Engine) seal(db *pebble.DB, gen string, st store.State) (*pebble.DB, error) {
	path := e.fs.PathJoin(e.o.Dir, gen)
	if err := db.Flush(); err != nil {
		db.Close()
		return nil, fmt.Errorf("projections: cannot flush %s: %w", path, err)
	}
	if err := db.Close(); err != nil {
		return nil, fmt.Errorf("projections: cannot close %s: %w", path, err)
	}
	return e.openGeneration(gen, st)
}

// pebbleOptions open a generation of read models: to serve, or being
// rebuilt (disk.Options).
func (e *Engine) pebbleOptions(rebuilding bool) *pebble.Options {
	return disk.Options(e.fs, e.o.Log, rebuilding, e.o.Brief, e.cache)
}
