package projections

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/google/go-cmp/cmp"
	"github.com/meshctl/mesh/projections/disk"
	"github.com/meshctl/mesh/projections/rows"
)

// foldedAndPublished folds n enrolments into read models in dir in two
// flushed halves, two tables in level 0 that both hold the checkpoint's
// row (so that compacting them writes a table anew rather than moving one
// down as it was), keeps a snapshot of them and publishes it; tamper, when
// set, is given the kept snapshot's read models before they are published.
func foldedAndPublished(t *testing.T, dir string, n int, tamper func(db *pebble.DB)) (*Engine, uint64) {
	t.Helper()
	ctx := context.Background()
	s := newStore(t)
	e, _, err := Open(ctx, Options{Dir: dir, FS: vfs.Default, Store: s, Keys: testKeys})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	e.Start()
	var last uint64
	for _, from := range []int{0, n / 2} {
		waitFor(t, e, enrollMany(t, s, from, n/2))
		if err := e.db.Flush(); err != nil {
			t.Fatal(err)
		}
		last = e.Checkpoint()
	}
	if err := e.dir().TakeSnapshot(e.db, last, time.Now().UnixNano()); err != nil {
		t.Fatal(err)
	}
	if tamper != nil {
		kept := e.dir().Snapshots()
		db, err := pebble.Open(e.fs.PathJoin(e.dir().SnapshotsDir(), kept[len(kept)-1].Name), e.pebbleOptions(false))
		if err != nil {
			t.Fatal(err)
		}
		tamper(db)
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.Publish(ctx); err != nil {
		t.Fatal(err)
	}
	return e, last
}

// Issue 34: the snapshot a controller with no read models fetches whole is
// as small as the read models' tables make it: level 0 (node rows written
// again and again, most superseded) is compacted away before it is
// published, so a start neither fetches nor compacts it; and read models
// started from it are the publisher's, row for row.
func TestAPublishedSnapshotHasNoLevelZeroAndStartsTheSameReadModels(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	a, last := foldedAndPublished(t, dir+"/a", 200, nil)
	on, err := a.o.Store.Snapshots(ctx)
	if err != nil || len(on) != 1 {
		t.Fatalf("snapshots on the bus: %v, %v", on, err)
	}
	path := dir + "/fetched"
	if err := a.bus().Fetch(ctx, on[0], path); err != nil {
		t.Fatal(err)
	}
	db, err := pebble.Open(path, &pebble.Options{FS: vfs.Default, ReadOnly: true, Logger: disk.Logger{Log: a.o.Log}})
	if err != nil {
		t.Fatal(err)
	}
	levels, err := db.SSTables(pebble.WithProperties())
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	if len(levels[0]) > 0 {
		t.Errorf("the published snapshot holds %d table(s) in level 0, which a start compacts before it serves", len(levels[0]))
	}
	below := 0
	for _, tables := range levels[1:] {
		below += len(tables)
	}
	if below == 0 {
		t.Fatal("the published snapshot holds no table at all: level 0 was dropped, not compacted")
	}
	b, o, err := Open(ctx, Options{Dir: dir + "/b", FS: vfs.Default, Store: a.o.Store, Keys: testKeys, FromPublished: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if o.FromSnapshot != last {
		t.Fatalf("started from event %d, not the published snapshot's %d", o.FromSnapshot, last)
	}
	b.Start()
	waitFor(t, b, last)
	historyWhole(t, b)
	if d := cmp.Diff(snapshot(t, a), snapshot(t, b)); d != "" {
		t.Fatalf("read models started from the published snapshot differ from the publisher's:\n%s", d)
	}
}

// A snapshot proven by the controller's own key is still held to the log:
// read models that hold a node the log never enrolled (a fault in the
// publisher, a disk that flipped a row before it was packed) are named by
// verify, row and model, though the proof and the bytes' digest hold.
func TestVerifyNamesARowOfAPublishedSnapshotTheLogDoesNotHold(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, _ := foldedAndPublished(t, t.TempDir(), 20, func(db *pebble.DB) {
		if err := db.Set(nodeKey("ghost"), rows.EncodeNode(Node{Name: "ghost"}), pebble.Sync); err != nil {
			t.Fatal(err)
		}
	})
	c, found, err := e.VerifyPublished(ctx)
	if err != nil || !found {
		t.Fatalf("verify of the published snapshot: found %v, %v", found, err)
	}
	if c.Refused != "" {
		t.Fatalf("a snapshot under the controller's proof was refused (%s), not compared with the log", c.Refused)
	}
	if !strings.Contains(c.Diff, "ghost") {
		t.Fatalf("verify did not name the row the log does not hold; its diff:\n%s", c.Diff)
	}
}
