package published

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/objstorage/objstorageprovider"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/meshctl/mesh/events/store"
)

// A start from a brief snapshot serves before it holds the history index
// of the events the snapshot holds; FillHistory brings it afterwards, from
// the whole snapshot of the same moment (or a later one), beside the
// serving read models.
//
// The whole snapshot's tables cannot join the live read models as they
// are: Pebble ingests only tables whose keys carry no sequence number of
// their own, and a checkpoint's do. So its history rows are read in key
// order into one new table, which Pebble then ingests whole: one
// sequential write, against a batch a row that would go through the log,
// the memtable and every level's compactions again.

// Live is what FillUntilWhole asks of the serving read models.
type Live interface {
	// Hold holds them against a rebuild, a verify or a close, answering
	// them and the event up to which their history index is missing (0:
	// none); release when done.
	Hold(ctx context.Context) (db *pebble.DB, from uint64, release func())
	// Whole says their history index is whole (the marker gone).
	Whole(db *pebble.DB) error
	// Rebuild folds every event again.
	Rebuild(ctx context.Context) error
}

// fillTries is how many times FillUntilWhole tries the bus, every apart,
// before it folds every event again instead (a rebuild): read models
// without their history index neither keep nor publish a snapshot, so
// waiting for the bus to heal could last for ever.
const fillTries = 3

// FillUntilWhole fills live's history index in (FillHistory) until it is
// whole: failing, it says so and tries again, then rebuilds. A rebuild
// meanwhile (an operator's) folds the history itself, and ends it. ctx
// ending (the engine closing) ends it too, and the next start goes on.
func (b Bus) FillUntilWhole(ctx context.Context, live Live, every time.Duration) {
	for tries := 1; ; tries++ {
		db, from, release := live.Hold(ctx)
		if from == 0 {
			release()
			return
		}
		start := time.Now()
		sn, err := b.FillHistory(ctx, db, from)
		if err == nil {
			err = live.Whole(db)
		}
		release()
		switch {
		case err == nil:
			b.Log.Info("projections: the history index is whole", "through", from, "snapshot", sn.Name, "took", time.Since(start).Round(time.Millisecond))
			return
		case ctx.Err() != nil:
			return
		case tries == fillTries:
			b.Log.Warn("cannot fill in the history index from the snapshots on the bus; folding every event again", "through", from, "err", err)
			if err := live.Rebuild(ctx); err != nil && ctx.Err() == nil {
				b.Log.Error("the history index is not whole, and folding every event again failed; mesh projections rebuild tries again", "err", err)
			}
			return
		}
		b.Log.Warn("cannot fill in the history index from the snapshot on the bus; trying again", "through", from, "err", err, "in", every)
		select {
		case <-ctx.Done():
			return
		case <-time.After(every):
		}
	}
}

// FillHistory writes the history index of the events up to checkpoint
// into live, from the newest whole snapshot on the bus holding at least
// those events. The rows of later events are live's own (the tail folded
// since), so they are not written again.
func (b Bus) FillHistory(ctx context.Context, live *pebble.DB, checkpoint uint64) (store.Snapshot, error) {
	all, err := b.Store.Snapshots(ctx)
	if err != nil {
		return store.Snapshot{}, err
	}
	st, err := b.Store.State(ctx)
	if err != nil {
		return store.Snapshot{}, err
	}
	for i := len(all) - 1; i >= 0 && all[i].Checkpoint >= checkpoint; i-- {
		sn := all[i]
		err := b.usable(sn, st)
		if err == nil {
			err = b.fillFrom(ctx, live, sn, checkpoint)
		}
		if err == nil {
			return sn, nil
		}
		if ctx.Err() != nil {
			return store.Snapshot{}, err
		}
		b.Log.Warn("a snapshot on the bus is passed over for the history index: "+err.Error(), "snapshot", sn.Name)
	}
	return store.Snapshot{}, fmt.Errorf("projections: no whole snapshot on the bus holds the history index up to event %d; mesh projections rebuild folds it from the log", checkpoint)
}

func (b Bus) fillFrom(ctx context.Context, live *pebble.DB, sn store.Snapshot, checkpoint uint64) error {
	fs := b.Dir.FS
	dir := b.Dir.Path + ".history"
	if err := fs.RemoveAll(dir); err != nil {
		return err
	}
	defer fs.RemoveAll(dir)
	path := fs.PathJoin(dir, "snapshot")
	if err := b.Fetch(ctx, sn, path); err != nil {
		return err
	}
	src, err := b.openFetched(path, sn)
	if err != nil {
		return err
	}
	defer src.Close()
	table := fs.PathJoin(dir, "history.sst")
	n, err := b.writeHistory(src, table, live.TableFormat(), checkpoint)
	if err != nil || n == 0 {
		return err // nothing to ingest: Pebble refuses an empty table
	}
	return live.Ingest(ctx, []string{table})
}

// writeHistory writes src's history rows of events up to checkpoint into
// a new table at path, in the table format live writes, and answers how
// many.
func (b Bus) writeHistory(src *pebble.DB, path string, format sstable.TableFormat, checkpoint uint64) (int, error) {
	span := b.Models.History()
	return b.writeRows(src, path, format, func(key []byte) bool { return b.Models.HistorySeq(key) <= checkpoint },
		pebble.IterOptions{LowerBound: span.Start, UpperBound: span.End})
}

// writeRows writes the rows of src within each of spans that keep keeps
// into one new table at path (keys carrying no sequence number of their
// own: what Pebble ingests), in key order, and answers how many.
func (b Bus) writeRows(src pebble.Reader, path string, format sstable.TableFormat, keep func(key []byte) bool, spans ...pebble.IterOptions) (int, error) {
	f, err := b.Dir.FS.Create(path, "")
	if err != nil {
		return 0, err
	}
	w := sstable.NewWriter(objstorageprovider.NewFileWritable(f), sstable.WriterOptions{TableFormat: format})
	n := 0
	for _, span := range spans {
		it, err := src.NewIter(&span)
		if err != nil {
			w.Close()
			return 0, err
		}
		for it.First(); it.Valid(); it.Next() {
			if keep != nil && !keep(it.Key()) {
				continue
			}
			if err := w.Set(it.Key(), it.Value()); err != nil {
				it.Close()
				w.Close()
				return 0, err
			}
			n++
		}
		if err := errors.Join(it.Error(), it.Close()); err != nil {
			w.Close()
			return 0, err
		}
	}
	return n, w.Close()
}
