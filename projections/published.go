package projections

import (
	"context"
	"encoding/binary"

	"github.com/cockroachdb/pebble/v2"
	"github.com/meshctl/mesh/events/store"
	"github.com/meshctl/mesh/projections/disk"
	"github.com/meshctl/mesh/projections/published"
)

// Published snapshots (issue 34) are package published's: packing the
// newest kept snapshot with its proof, when the live fold publishes, and
// fetching, checking and verifying one. What stays here is what only the
// read models can answer it (busModels), and the engine's calls.

// bus is the engine's read models as package published sees them.
func (e *Engine) bus() published.Bus {
	return published.Bus{Dir: e.dir(), Store: e.o.Store, Log: e.o.Log, MAC: e.o.Keys.LogMAC(), Schema: schemaVersion, Models: busModels{e}}
}

// Publish puts the newest local snapshot of the read models on the bus,
// with its proof (published.Bus.Publish), and counts the next publish from
// it.
func (e *Engine) Publish(ctx context.Context) (store.Snapshot, error) {
	return e.publisher.Publish(ctx, e.bus())
}

// fromPublished fills the generation directory gen with the newest usable
// snapshot on the bus and answers the event it holds (0: none was usable).
// A brief one carries its marker (fillHistory brings the history).
func (e *Engine) fromPublished(ctx context.Context, gen string, st store.State) uint64 {
	return e.bus().Newest(ctx, e.fs.PathJoin(e.o.Dir, gen), st)
}

// fillHistory brings the history index of the events up to the brief
// snapshot's (published.Bus.FillUntilWhole) once the tail the start found
// is folded: a fetch beside that fold takes cores it needs to be ready
// (docs/performance.md).
func (e *Engine) fillHistory() {
	if e.WaitFor(e.closing, e.tailEnd) == nil {
		e.bus().FillUntilWhole(e.closing, liveModels{e}, e.fillEvery)
	}
}

// liveModels lends package published the serving read models.
type liveModels struct{ e *Engine }

// Hold holds them as a long fold: a rebuild or a verify waits for it, and
// one that came first is waited for. They are swapped (a rebuild) or
// closed only under it, so db stays theirs until release.
func (l liveModels) Hold(ctx context.Context) (db *pebble.DB, from uint64, release func()) {
	ctx, release = l.e.long(ctx)
	if l.e.view(func(r pebble.Reader) error { db = r.(*pebble.DB); return nil }) == nil && ctx.Err() == nil {
		from = readU64(db, keyHistoryFrom)
	}
	return db, from, release
}

func (l liveModels) Whole(db *pebble.DB) error { return db.Delete(keyHistoryFrom, pebble.Sync) }

func (l liveModels) Rebuild(ctx context.Context) error {
	_, err := l.e.Rebuild(ctx, nil)
	return err
}

// VerifyPublished holds the newest snapshot on the bus to what a
// controller starting from it relies on (published.Bus.Verify); its fold
// from the first event is a long one, one at a time with rebuild and
// verify. found is false when there is none.
func (e *Engine) VerifyPublished(ctx context.Context) (published.Check, bool, error) {
	ctx, done := e.long(ctx)
	defer done()
	return e.bus().Verify(ctx)
}

// busModels answers package published what only the read models' rows and
// options say.
type busModels struct{ e *Engine }

func (m busModels) Options(readOnly bool) *pebble.Options {
	if readOnly {
		return &pebble.Options{FS: m.e.fs, ReadOnly: true, Logger: disk.Logger{Log: m.e.o.Log}}
	}
	// As a rebuild opens them, without a log of their own: the copy is
	// only compacted before it is packed, never written. With a block
	// cache of its own, not the live read models' (disk.NewCache): the
	// copy replays the live memtable it holds as a log into a memtable of
	// its own (up to 16 MiB), whose size Pebble reserves out of its block
	// cache; at 100,000 nodes a publish falls twice in every push, and in
	// the live models' cache that reservation would push out the rows and
	// filters the push's fold is looking up. (Compactions read through
	// buffers of their own, not the block cache.)
	return disk.Options(m.e.fs, m.e.o.Log, true, m.e.o.Brief, nil)
}

func (m busModels) Identity(r pebble.Reader) (published.Identity, error) {
	var id identity
	if _, err := getJSON(r, keyIdentity, &id); err != nil {
		return published.Identity{}, err
	}
	return published.Identity{Stream: id.Stream, Created: id.Created, Schema: readU64(r, keySchema)}, nil
}

func (m busModels) Checkpoint(r pebble.Reader) uint64 { return readCheckpoint(r) }

func (m busModels) History() pebble.KeyRange {
	lo, hi := prefixBounds(prefixHistory)
	return pebble.KeyRange{Start: lo, End: hi}
}

// HistorySeq: a history key ends in its event's sequence (history.go).
func (m busModels) HistorySeq(key []byte) uint64 { return binary.BigEndian.Uint64(key[len(key)-8:]) }

func (m busModels) SameBrief(brief, whole pebble.Reader) (string, error) {
	return compareRowsBut(brief, whole, prefixHistory)
}

// BriefMark is the row a brief snapshot carries to say its history index
// is to follow (keyHistoryFrom), inside its proven bytes: read models
// fetched from one are never on disk without it.
func (m busModels) BriefMark(checkpoint uint64) (key, value []byte) {
	return keyHistoryFrom, u64(checkpoint)
}

func (m busModels) Compare(ctx context.Context, held pebble.Reader, at uint64, dir string) (string, error) {
	diff, _, err := m.e.foldAndCompare(ctx, held, at, dir, nil)
	return diff, err
}
