package projections

import (
	"context"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/meshctl/mesh/projections/disk"
)

// TestEveryPebbleOfTheReadModelsSharesOneBlockCache holds a copy of the
// read models (time travel, verify) and a rebuild's generation to the live
// read models' block cache: each with a cache of its own, a rebuild at
// 10,000 nodes and a million events peaked at 397 MiB of issue 34's 400
// (docs/performance.md, "Memory"). What the copy reads lands in the one
// cache the live models read from; and every engine gives back the
// reference it took, so the last one, the caller's, frees the cache
// without a panic of Pebble's for a count gone below zero.
func TestEveryPebbleOfTheReadModelsSharesOneBlockCache(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	cache := disk.NewCache()
	e, _, err := Open(ctx, Options{Dir: "proj", FS: vfs.NewMem(), Store: s, BatchSize: 4, Keys: testKeys, Cache: cache})
	if err != nil {
		t.Fatal(err)
	}
	e.Start()
	waitFor(t, e, enrollMany(t, s, 0, 40))
	cp, err := e.FoldCopy(ctx, 0, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	// The copy's rows into tables, then read through its own Pebble.
	if err := cp.db.Flush(); err != nil {
		t.Fatal(err)
	}
	before := e.db.Metrics().BlockCache.Count
	if nodes, err := cp.Nodes(); err != nil || len(nodes) != 40 {
		t.Fatalf("the copy lists %d nodes (%v), want 40", len(nodes), err)
	}
	if after := e.db.Metrics().BlockCache.Count; after <= before {
		t.Errorf("reading the copy left the live read models' block cache at %d blocks (%d before): the copy has a cache of its own", after, before)
	}
	cp.Close()
	if _, err := e.Rebuild(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if e.db.Metrics().BlockCache.Size == 0 {
		t.Error("the rebuilt generation's block cache holds nothing")
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	cache.Unref()
}
