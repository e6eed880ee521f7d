package projections

import (
	"bytes"
	"context"
	"io"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/google/go-cmp/cmp"
	"github.com/meshctl/mesh/declaration"
	"github.com/meshctl/mesh/embedded/embeddedtest"
	"github.com/meshctl/mesh/events/store"
	"github.com/meshctl/mesh/projections/foldtest"
	"github.com/meshctl/mesh/projections/published"
)

// publishing folds a stream of enrolments with an engine that keeps a
// snapshot every 10 events and publishes one every 20, and answers it
// until a snapshot holding at least 40 events is on the bus, and closes it,
// so that nothing more is published.
func publishing(t *testing.T, s *store.Store, dir string) {
	t.Helper()
	e, _, err := Open(context.Background(), Options{Dir: dir, FS: vfs.Default, Store: s, BatchSize: 3, Keys: testKeys, SnapshotEvery: 10, PublishEvery: 20})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	e.Start()
	for i := 0; i < 60; i += 5 {
		waitFor(t, e, enrollMany(t, s, i, 5))
	}
	// Every event folded, so none starts another: the last one finished
	// before the engine closes, rather than cut by it. One that began at
	// event 20 and ended after the last fold (a loaded box) left no
	// snapshot of 40 on the bus, and no event to start another; the test
	// waited 30 s for it and failed. That one is published here, as the
	// engine would at its next 20 events.
	embeddedtest.Eventually(t, "the engine's publish in flight to end", func() bool { return !e.publisher.Publishing() })
	if on, err := s.Snapshots(context.Background()); err != nil || len(on) == 0 || on[len(on)-1].Checkpoint < 40 {
		if _, err := e.Publish(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	embeddedtest.Eventually(t, "a snapshot holding 40 events or more on the bus", func() bool {
		on, err := s.Snapshots(context.Background())
		return err == nil && len(on) > 0 && on[len(on)-1].Checkpoint >= 40 && !e.publisher.Publishing()
	})
}

// equalsAFreshFold holds e's read models (what names them) to a fold of
// the stream from its first event, and to verify, which proves the same.
func equalsAFreshFold(t *testing.T, e *Engine, what string) {
	t.Helper()
	full, err := e.FoldCopy(context.Background(), 0, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	defer full.Close()
	if d := cmp.Diff(snapshot(t, full), snapshot(t, e)); d != "" {
		t.Fatalf("%s differ from a fold from the first event:\n%s", what, d)
	}
	if diff, _, err := e.Verify(context.Background(), nil); err != nil || diff != "" {
		t.Fatalf("verify of %s: %v\n%s", what, err, diff)
	}
}

// A controller with no read models (a new machine, a reset) starts from
// the newest snapshot on the bus, folds only the tail, and ends with read
// models equal to the publisher's; the bucket keeps two.
func TestReadModelsStartFromTheNewestSnapshotOnTheBus(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	dir := t.TempDir()
	publishing(t, s, dir+"/a")
	last := enrollMany(t, s, 100, 7) // the tail the snapshot does not hold
	on, err := s.Snapshots(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(on) > 2 {
		t.Fatalf("the bucket keeps %d snapshots, not the newest two", len(on))
	}
	newest := on[len(on)-1].Checkpoint

	b, o, err := Open(ctx, Options{Dir: dir + "/b", FS: vfs.Default, Store: s, BatchSize: 3, Keys: testKeys, FromPublished: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if o.FromSnapshot != newest || o.Checkpoint != newest {
		t.Fatalf("read models made fresh started from event %d with checkpoint %d, not from the newest snapshot on the bus (%d)", o.FromSnapshot, o.Checkpoint, newest)
	}
	b.Start()
	waitFor(t, b, last)
	historyWhole(t, b)
	equalsAFreshFold(t, b, "read models from the snapshot and the tail")
	// And verify holds the snapshot itself to a fold up to what it holds.
	if c, found, err := b.VerifyPublished(ctx); err != nil || !found || c.Refused != "" || c.Diff != "" || c.Snapshot.Checkpoint != newest {
		t.Fatalf("verify of the snapshot on the bus: found %v, %+v, %v", found, c, err)
	}
}

// A snapshot is believed only with the controller's proof of its exact
// bytes: a replayed proof, bytes changed under a copied proof, and a
// snapshot proven by another key are each passed over, and the read
// models start from the newest one that holds, or from the first event.
func TestASnapshotWithoutTheControllersProofIsPassedOver(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	dir := t.TempDir()
	publishing(t, s, dir+"/a")
	// Events after the snapshot: a forgery claiming a later event is then
	// within the stream, and refused for its proof, not for being ahead.
	enrollMany(t, s, 200, 5)
	on, err := s.Snapshots(ctx)
	if err != nil {
		t.Fatal(err)
	}
	real := on[len(on)-1]
	body := func() []byte {
		r, err := s.OpenSnapshot(ctx, real)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		b, err := io.ReadAll(r)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}()
	copied := func(string) map[string]string { return real.Fields }
	// Its proof replayed on a snapshot claiming to hold more.
	if _, err := s.PutSnapshot(ctx, real.Checkpoint+1, bytes.NewReader(body), copied); err != nil {
		t.Fatal(err)
	}
	open := func(name string, keys *declaration.Keyring) Opening {
		t.Helper()
		e, o, err := Open(ctx, Options{Dir: dir + "/" + name, FS: vfs.Default, Store: s, BatchSize: 3, Keys: keys, FromPublished: true})
		if err != nil {
			t.Fatal(err)
		}
		e.Close()
		return o
	}
	if o := open("replayed", testKeys); o.FromSnapshot != real.Checkpoint {
		t.Fatalf("with a replayed proof on the newest, read models started from event %d, not from the proven snapshot's %d", o.FromSnapshot, real.Checkpoint)
	}
	e, _, err := Open(ctx, Options{Dir: dir + "/verifier", FS: vfs.Default, Store: s, BatchSize: 3, Keys: testKeys})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if c, found, err := e.VerifyPublished(ctx); err != nil || !found || c.Refused == "" || c.Stale {
		t.Fatalf("verify of a snapshot with a replayed proof: found %v, %+v, %v", found, c, err)
	}
	// Its bytes changed (one byte), its proof copied: the digest differs.
	changed := bytes.Clone(body)
	changed[len(changed)/2] ^= 1
	if _, err := s.PutSnapshot(ctx, real.Checkpoint+2, bytes.NewReader(changed), copied); err != nil {
		t.Fatal(err)
	}
	// The bucket keeps two: the proven one made way for the forgeries.
	if o := open("changed", testKeys); o.FromSnapshot != 0 || o.Checkpoint != 0 {
		t.Fatalf("with changed bytes (and a replayed proof) on the bus, read models started from event %d (checkpoint %d), not from nothing", o.FromSnapshot, o.Checkpoint)
	}
	if c, found, err := e.VerifyPublished(ctx); err != nil || !found || c.Refused == "" || c.Stale {
		t.Fatalf("verify of a snapshot with changed bytes: found %v, %+v, %v", found, c, err)
	}
	// Another controller key proves none of them: from the first event.
	if o := open("other", foldtest.Keys(t)); o.FromSnapshot != 0 || o.Checkpoint != 0 {
		t.Fatalf("under another key, read models started from event %d (checkpoint %d), not from nothing", o.FromSnapshot, o.Checkpoint)
	}
	// Of another schema (a binary upgraded since): passed over, no fault.
	stale := map[string]string{}
	for k, v := range real.Fields {
		stale[k] = v
	}
	stale[published.FieldSchema] = "1"
	if _, err := s.PutSnapshot(ctx, real.Checkpoint+3, bytes.NewReader(body), func(string) map[string]string { return stale }); err != nil {
		t.Fatal(err)
	}
	if c, found, err := e.VerifyPublished(ctx); err != nil || !found || !c.Stale {
		t.Fatalf("verify of a snapshot of another schema: found %v, %+v, %v", found, c, err)
	}
}
