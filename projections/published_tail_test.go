package projections

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/meshctl/mesh/declaration"
	"github.com/meshctl/mesh/embedded/embeddedtest"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/events/store"
	"github.com/meshctl/mesh/projections/published"
	"github.com/nats-io/nkeys"
)

// reportEach appends a report of each of nodes (applying a declaration it
// was never sent: the fold reads it all the same) and answers the last
// sequence.
func reportEach(t *testing.T, s *store.Store, nodes ...string) uint64 {
	t.Helper()
	kp, _ := nkeys.CreateUser()
	signer, err := declaration.NewSigner(kp)
	if err != nil {
		t.Fatal(err)
	}
	var last uint64
	for _, n := range nodes {
		if last, err = s.Report(context.Background(), n, "rep-"+n, events.DeclarationApplied{Node: n, Sequence: 1, Digest: "d"},
			store.Sealing{Signer: signer, MAC: testKeys.NodeMAC(n)}); err != nil {
			t.Fatal(err)
		}
	}
	return last
}

func named(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	return out
}

// Issue 34: a controller with no read models starts from the newest
// snapshot on the bus and reads only what came after it. Reports before
// each of two snapshots and after the newest: a start that read from an
// older snapshot, or from the first event, hears reports it should not.
func TestAStartReadsOnlyTheTailAfterTheNewestSnapshot(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	dir := t.TempDir()
	pub := openPublisher(t, s, dir+"/a")
	var snaps []uint64
	for _, prefix := range []string{"before-older", "before-newest"} {
		waitFor(t, pub, reportEach(t, s, named(prefix, 5)...))
		// A last event, so that the fold keeps a snapshot holding the
		// reports (it keeps one after a commit, of what it committed).
		waitFor(t, pub, enrollMany(t, s, len(snaps)*10, 1))
		sn, err := pub.Publish(ctx)
		if err != nil {
			t.Fatal(err)
		}
		snaps = append(snaps, sn.Checkpoint)
	}
	if on, err := s.Snapshots(ctx); err != nil || len(on) != 2 || on[1].Checkpoint != snaps[1] || snaps[0] >= snaps[1] {
		t.Fatalf("the bus holds snapshots %+v (%v), not the two published at %v", on, err, snaps)
	}
	tail := named("tail", 4)
	last := reportEach(t, s, tail...)

	var mu sync.Mutex
	var heard []string
	b, o, err := Open(ctx, Options{Dir: dir + "/b", FS: vfs.Default, Store: s, BatchSize: 3, Keys: testKeys, FromPublished: true,
		Heard: func(h Heard) { mu.Lock(); heard = append(heard, h.Node); mu.Unlock() }})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if o.FromSnapshot != snaps[1] || o.Checkpoint != snaps[1] {
		t.Fatalf("read models made fresh started from event %d (checkpoint %d), not from the newest snapshot's %d", o.FromSnapshot, o.Checkpoint, snaps[1])
	}
	b.Start()
	waitFor(t, b, last)
	// The rows read ahead of the tail (warm) are the memory views read
	// from, and agree with Pebble's.
	embeddedtest.Eventually(t, "views reading the memory of node rows after a start from a snapshot", func() bool { return fromMemory(t, b, false) })
	mu.Lock()
	defer mu.Unlock()
	if fmt.Sprint(heard) != fmt.Sprint(tail) {
		t.Fatalf("the start read the reports %v; only the tail after the newest snapshot, %v, is to be read", heard, tail)
	}
}

// A snapshot of an older schema (rows a binary before this one wrote,
// such as history rows with their digests in hex, schema 23) is never
// started from, even with its proof whole: the read models are folded
// from the first event instead, and verify calls it stale.
func TestASnapshotOfAnOlderSchemaIsFoldedAgain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	dir := t.TempDir()
	pub := openPublisher(t, s, dir+"/a")
	waitFor(t, pub, reportEach(t, s, named("before", 3)...))
	waitFor(t, pub, enrollMany(t, s, 0, 1))
	sn, err := pub.Publish(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r, err := s.OpenSnapshot(ctx, sn)
	if err != nil {
		t.Fatal(err)
	}
	older := schemaVersion - 1
	st, err := s.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.PutSnapshot(ctx, sn.Checkpoint, r, func(digest string) map[string]string {
		f := map[string]string{}
		for k, v := range sn.Fields {
			f[k] = v
		}
		f[published.FieldSchema] = fmt.Sprint(older)
		f[published.FieldProof] = pub.bus().Proof(st.Stream, f[published.FieldCreated], uint64(older), sn.Checkpoint, digest)
		return f
	})
	r.Close()
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	heard := 0
	b, o, err := Open(ctx, Options{Dir: dir + "/b", FS: vfs.Default, Store: s, BatchSize: 3, Keys: testKeys, FromPublished: true,
		Heard: func(Heard) { mu.Lock(); heard++; mu.Unlock() }})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if o.FromSnapshot != 0 || o.Checkpoint != 0 {
		t.Fatalf("read models started from a snapshot of schema %d (event %d, checkpoint %d); this binary folds %d", older, o.FromSnapshot, o.Checkpoint, schemaVersion)
	}
	b.Start()
	waitFor(t, b, st.LastSeq)
	mu.Lock()
	defer mu.Unlock()
	if heard != 3 {
		t.Fatalf("the fold from the first event read %d report(s), not the 3 the stream holds", heard)
	}
	if c, found, err := b.VerifyPublished(ctx); err != nil || !found || !c.Stale {
		t.Fatalf("verify of a snapshot of schema %d: found %v, %+v, %v", older, found, c, err)
	}
}

// The tail is bounded by time as well as by events: once PublishAfter has
// passed since the last publish, the next commit publishes what the fold
// holds, though far fewer than PublishEvery events came; and not again
// until PublishAfter has passed once more.
func TestASnapshotIsPublishedOnceItsTimeHasPassed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	const after = time.Minute
	e, _, err := Open(ctx, Options{Dir: t.TempDir(), FS: vfs.Default, Store: s, BatchSize: 3, Keys: testKeys,
		SnapshotEvery: 1_000_000, PublishEvery: 1_000_000, PublishAfter: after})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	var clock atomic.Int64
	clock.Store(time.Now().UnixNano())
	e.now = func() time.Time { return time.Unix(0, clock.Load()) }
	e.Start()
	newest := func() uint64 {
		on, err := s.Snapshots(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(on) == 0 {
			return 0
		}
		return on[len(on)-1].Checkpoint
	}
	before := enrollMany(t, s, 0, 5)
	waitFor(t, e, before)
	if n := newest(); n != 0 {
		t.Fatalf("a snapshot of event %d was published before its time", n)
	}
	clock.Add(int64(after + time.Second))
	waitFor(t, e, enrollMany(t, s, 5, 2))
	embeddedtest.Eventually(t, "the snapshot published once its time passed", func() bool { return newest() > before && !e.publisher.Publishing() })
	published := newest()
	waitFor(t, e, enrollMany(t, s, 7, 4))
	if e.publisher.Publishing() || newest() != published {
		t.Fatalf("publishing again (newest on the bus %d, after %d) before another %s passed", newest(), published, after)
	}
}

// openPublisher is read models in dir, started, that keep a snapshot after
// every commit, so that each Publish holds everything folded before it.
func openPublisher(t *testing.T, s *store.Store, dir string) *Engine {
	t.Helper()
	e, _, err := Open(context.Background(), Options{Dir: dir, FS: vfs.Default, Store: s, BatchSize: 3, Keys: testKeys, SnapshotEvery: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	e.Start()
	return e
}
