package projections

import (
	"context"
	"errors"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/meshctl/mesh/events/store"
)

// Time travel (status --as-of, node show --as-of) folds the stream up to a
// moment into a copy of the read models. From the stream's start that is a
// whole rebuild: at a million events it ran past any command's timeout. So
// the live fold leaves a snapshot of the read models every SnapshotEvery
// events (a Pebble checkpoint: its tables hard-linked, nothing copied), and
// a fold into the past starts from the newest snapshot that holds nothing
// later than the moment asked about, folding at most SnapshotEvery events.
// Where snapshots are kept, how they are named and thinned, is disk's.

// DefaultSnapshotEvery is how many events apart the controller's snapshots
// are: at the fold's rate, half a second of folding from one. At 50,000,
// status --as-of at a million events took 1.1 to 3 s, most of it folding.
const DefaultSnapshotEvery = 25_000

// maybeSnapshot keeps a snapshot of the live read models when the live
// fold has committed SnapshotEvery events since the last one. It runs in
// the fold, right after a commit, so it knows exactly what the snapshot
// holds: a Pebble checkpoint costs a log sync and a hard link a table.
func (e *Engine) maybeSnapshot(db *pebble.DB, last uint64, latest int64) {
	late := e.publisher.Late(last, e.now())
	if !late && (e.o.SnapshotEvery == 0 || last < e.lastSnap.Load()+e.o.SnapshotEvery) {
		return
	}
	// Read only when one is due, not at every commit of the live fold.
	if readU64(db, keyHistoryFrom) > 0 {
		return // without their history index: neither kept nor published
	}
	e.lastSnap.Store(last)
	if err := e.dir().TakeSnapshot(db, last, latest); err != nil {
		e.o.Log.Warn("cannot keep a snapshot of the read models for time travel (as-of answers fold from further back)", "err", err)
		return
	}
	e.publisher.Maybe(e.closing, e.bus(), last, late, e.now())
}

// copyFromSnapshot answers read models folded up to moment at, starting
// from the newest snapshot that may answer it; nil when none may.
func (e *Engine) copyFromSnapshot(ctx context.Context, at time.Time) (*Engine, error) {
	best, ok := e.dir().Newest(at.UnixNano())
	if !ok {
		return nil, nil
	}
	dir, err := e.dir().LinkSnapshot(best)
	if err != nil {
		return nil, err
	}
	cp, _, err := e.openChild(ctx, Options{Dir: dir, FS: e.fs, Store: e.o.Store, BatchSize: e.o.BatchSize, Keys: e.o.Keys, Log: e.o.Log, Brief: true})
	if err != nil {
		e.fs.RemoveAll(dir)
		return nil, err
	}
	cp.dropDir = true
	f := cp.newFolder(cp.db, cp.committed)
	f.asOf = at
	err = cp.fold(ctx, store.ReadOptions{From: best.Checkpoint + 1}, f)
	f.discard()
	if err != nil && !errors.Is(err, errPast) {
		cp.Close()
		return nil, err
	}
	return cp, nil
}
