package projections

import (
	"context"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
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
	start := time.Now()
	st, err := e.o.Store.State(ctx)
	if err != nil {
		return Rebuilt{}, err
	}
	e.mu.RLock()
	from := e.gen
	e.mu.RUnlock()
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

// pebbleOptions open a generation of read models: to serve (with a WAL),
// or being rebuilt (without one: until CURRENT names the generation a
// crash abandons it whole, so logging its writes would only write them
// twice).
func (e *Engine) pebbleOptions(rebuilding bool) *pebble.Options {
	o := &pebble.Options{FS: e.fs, Logger: pebbleLogger{e.o.Log}, DisableWAL: rebuilding,
		MemTableSize: rebuildMemTable, L0CompactionThreshold: l0Compaction, L0StopWritesThreshold: 4 * l0Compaction,
		CacheSize: blockCache}
	// A bloom filter in every table (levels below inherit level 0's): a
	// fold looks up node rows and report keys one at a time, and level 0
	// holds up to l0Compaction tables that each span every key, so without
	// one a lookup read an index block of each.
	o.Levels[0].FilterPolicy = bloom.FilterPolicy(10)
	// Every level in Pebble's default, Snappy, not zstd below level 0:
	// zstd made a published snapshot a fifth smaller (the read models of
	// 2.6M events 117 MB against 145 compacted), a second or less of a
	// start's fetch at ten million events, but it made every status read
	// its node rows' blocks dearer: the first status after a push at
	// 100,000 nodes 455-627 CPU ms against 414-487, after a change
	// 1,189-1,223 against 1,053-1,126 (docs/performance.md, "A start from
	// a snapshot on the bus"). An operator asks status far more often
	// than a controller starts from nothing.
	if e.o.Brief {
		o.MemTableSize = 0 // Pebble's default: 4 MiB
	}
	return o
}

// rebuildMemTable is the largest memtable of read models, live or being
// rebuilt: 16 MiB against Pebble's default 4. Pebble grows memtables from
// 256 KiB towards it, so a small mesh never holds more than its data.
// Measured at a million real events (mesh up with no read models, then
// projections verify and rebuild): with 4 MiB ready in 26.5 s; with 16 MiB
// ready in 18.8 s, rebuild 14.5 s, verify 17.2 s, peak RSS 610 MiB; with
// 64 MiB ready in 18.4-18.9 s, rebuild 15.8 s, verify 14.7 s, but peak RSS
// 900 MiB. (Batches committed whole as Pebble's flushable batches, tried
// too, were faster at 300,000 events and slower at a million.)
const rebuildMemTable = 16 << 20

// l0Compaction is how many files level 0 gathers before Pebble compacts
// it into the level below: 16 against Pebble's 4. A fold writes node rows
// again and again (every send and report rewrites one), spread over the
// whole key space, so every compaction out of level 0 rewrote nearly all of
// the base level: catching up a million real events (10,000 nodes, read
// models of 72 MB) wrote 1.2 GB in compactions, a third of the
// controller's CPU. Gathering 16 files before compacting wrote 0.66-0.73
// GB, and the catch-up took 24-25 CPU seconds instead of 29-31. Reading
// through more files cost nothing measurable: status and node list of
// 10,000 nodes just after the catch-up took 80-100 and 130-170 ms, against
// 100-120 and 200-240 ms with the default.
const l0Compaction = 16

// blockCache is each generation's block cache: 64 MiB against Pebble's
// default 8. At 100,000 nodes a push's fold looks up each node's row and
// report key, and with 8 MiB those lookups read their index, filter and
// data blocks from the file again and again: 3.4 of the controller's 15.5
// CPU seconds over 20 s of the push, 1.1 with 64 MiB. Memory Pebble
// allocates itself as blocks are read, so a small mesh holds far less.
const blockCache = 64 << 20
