package projections

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/meshctl/mesh/projections/disk"
)

// TestEveryPebbleOfTheReadModelsSharesOneBlockCache holds every Pebble an
// engine opens beside its live read models to their block cache: a copy
// folded from the stream, a time-travel copy from a snapshot, a rebuild's
// generation. Each with a cache of its own, a rebuild at 10,000 nodes and
// a million events peaked at 382-397 MiB, at issue 34's 400
// (docs/performance.md, "Memory"). What each reads lands in the one cache;
// every engine gives back exactly the references it took (too many and
// Pebble panics at a count below zero, too few and the cache is never
// freed); and a copy asked of a closed engine is refused, not a panic.
func TestEveryPebbleOfTheReadModelsSharesOneBlockCache(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	cache := disk.NewCache()
	e, _, err := Open(ctx, Options{Dir: "proj", FS: vfs.NewMem(), Store: s, BatchSize: 4, Keys: testKeys, Cache: cache, SnapshotEvery: 10})
	if err != nil {
		t.Fatal(err)
	}
	e.Start()
	waitFor(t, e, enrollMany(t, s, 0, 40))
	// What a copy reads, from its opening on, lands in the one cache. (The
	// copy before it took its blocks with it as it closed.)
	readsIntoTheCache := func(what string, asOf time.Time) *Engine {
		t.Helper()
		before := cache.Metrics().Count
		cp, err := e.FoldCopy(ctx, 0, asOf)
		if err != nil {
			t.Fatal(err)
		}
		if err := cp.db.Flush(); err != nil { // its rows into tables, read through blocks
			t.Fatal(err)
		}
		if nodes, err := cp.Nodes(); err != nil || len(nodes) != 40 {
			t.Fatalf("%s lists %d nodes (%v), want 40", what, len(nodes), err)
		}
		if after := cache.Metrics().Count; after <= before {
			t.Errorf("reading %s left the live read models' block cache at %d blocks (%d before): it has a cache of its own", what, after, before)
		}
		cp.Close()
		return cp
	}
	readsIntoTheCache("a copy folded from the stream", time.Time{})
	if len(e.dir().Snapshots()) == 0 {
		t.Fatal("no snapshot was kept for time travel")
	}
	if past := readsIntoTheCache("a time-travel copy", time.Now()); !past.dropDir {
		t.Fatal("time travel folded from the stream, not from a snapshot")
	}
	if diff, _, err := e.Verify(ctx, nil); err != nil || diff != "" {
		t.Fatalf("verify: %v\n%s", err, diff)
	}
	if _, err := e.Rebuild(ctx, nil); err != nil {
		t.Fatal(err)
	}
	// The generation it replaced took its blocks with it as it closed:
	// any the cache holds now are the rebuilt one's.
	if nodes, err := e.Nodes(); err != nil || len(nodes) != 40 {
		t.Fatalf("the rebuilt read models list %d nodes (%v), want 40", len(nodes), err)
	}
	if cache.Metrics().Count == 0 {
		t.Error("the rebuilt read models read their rows, and the live cache holds no block of theirs: they have a cache of their own")
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := e.FoldCopy(ctx, 0, time.Time{}); !errors.Is(err, errClosed) {
		t.Errorf("a copy of closed read models answered %v, want %v", err, errClosed)
	}
	if _, err := e.Rebuild(ctx, nil); !errors.Is(err, errClosed) {
		t.Errorf("a rebuild of closed read models answered %v, want %v", err, errClosed)
	}
	cache.Unref()
	if !refusedAsFreed(cache) {
		t.Error("the cache still has a reference after every engine closed and the test gave back its own: one was never given back")
	}
}

// refusedAsFreed reports whether Pebble refuses to take a reference of
// cache, as it does (with a panic) once its last one went and it was freed.
func refusedAsFreed(cache *pebble.Cache) (refused bool) {
	defer func() { refused = recover() != nil }()
	cache.Ref()
	return false
}
