package projections

import (
	"context"
	"errors"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/meshctl/mesh/events/store"
)

// FoldCopy folds the stream from its start into a temporary, in-memory set
// of read models: up to the event at sequence until (0: the stream's end),
// and when asOf is set, only the events that occurred up to that moment. The
// copy does not follow the stream; Close it when done.
func (e *Engine) FoldCopy(ctx context.Context, until uint64, asOf time.Time) (*Engine, error) {
	return e.foldCopy(ctx, until, asOf, nil)
}

func (e *Engine) foldCopy(ctx context.Context, until uint64, asOf time.Time, progress func(Progress)) (*Engine, error) {
	if !asOf.IsZero() && until == 0 {
		cp, err := e.copyFromSnapshot(ctx, asOf)
		if cp != nil || err != nil {
			return cp, err
		}
	}
	cp, o, err := e.openChild(ctx, Options{Dir: "copy", FS: vfs.NewMem(), Store: e.o.Store, BatchSize: e.o.BatchSize, Keys: e.o.Keys})
	if err != nil {
		return nil, err
	}
	total := o.Stream.LastSeq
	if until > 0 {
		total = until
	}
	start := time.Now()
	f := cp.newFolder(cp.db, func(last uint64) {
		cp.committed(last)
		if progress != nil {
			progress(Progress{Folded: last, Total: total, Elapsed: time.Since(start)})
		}
	})
	f.asOf = asOf
	err = cp.fold(ctx, store.ReadOptions{From: 1, Until: until}, f)
	f.discard()
	if err != nil && !errors.Is(err, errPast) {
		cp.Close()
		return nil, err
	}
	return cp, nil
}
