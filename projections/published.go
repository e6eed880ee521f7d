package projections

import (
	"context"

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
func (e *Engine) fromPublished(ctx context.Context, gen string, st store.State) uint64 {
	return e.bus().Newest(ctx, e.fs.PathJoin(e.o.Dir, gen), st)
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
	// only compacted before it is packed, never written.
	return m.e.pebbleOptions(true)
}

func (m busModels) Identity(r pebble.Reader) (published.Identity, error) {
	var id identity
	if _, err := getJSON(r, keyIdentity, &id); err != nil {
		return published.Identity{}, err
	}
	return published.Identity{Stream: id.Stream, Created: id.Created, Schema: readU64(r, keySchema)}, nil
}

func (m busModels) Checkpoint(r pebble.Reader) uint64 { return readCheckpoint(r) }

func (m busModels) Compare(ctx context.Context, held pebble.Reader, at uint64, dir string) (string, error) {
	diff, _, err := m.e.foldAndCompare(ctx, held, at, dir, nil)
	return diff, err
}
