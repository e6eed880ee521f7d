package projections

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/meshctl/mesh/compose"
	"github.com/meshctl/mesh/declaration"
	"github.com/meshctl/mesh/embedded/embeddedtest"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/events/store"
	"github.com/meshctl/mesh/projections/disk"
	"github.com/meshctl/mesh/projections/published"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"
)

// pushRounds enrols n nodes (when round 1 is among rounds) and appends,
// for each round, a send to every node and its report: rows of the
// history index, which enrolments alone never make. It answers the last
// sequence.
func pushRounds(t *testing.T, s *store.Store, n int, from, to uint64) uint64 {
	t.Helper()
	ctx := context.Background()
	var last uint64
	for i := range n {
		node := fmt.Sprintf("node-%d", i)
		agg := events.NodeAggregate(node)
		agent, err := declaration.NewSigner(agentKey(t, node))
		if err != nil {
			t.Fatal(err)
		}
		version, err := s.Version(ctx, agg)
		if err != nil {
			t.Fatal(err)
		}
		if version == 0 {
			if version, err = s.Append(ctx, agg, 0, "enrol-"+node, events.NodeEnrolled{Name: node, Capabilities: []string{"linux"}, Labels: map[string]string{}}); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Report(ctx, node, "key-"+node, events.ReportKeyRecorded{Node: node, Key: agent.PublicKey()}, store.Sealing{Signer: agent, MAC: testKeys.NodeMAC(node)}); err != nil {
				t.Fatal(err)
			}
		}
		for round := from; round <= to; round++ {
			d := declaration.New(compose.Declaration{Mesh: "mesh", Node: node, Modules: []compose.ModuleBuild{}, Resources: []compose.Resource{}, Receives: []compose.Receipt{}}, round, "", time.Now())
			b := d.Canonical()
			digest := compose.Digest(b)
			if version, err = s.Append(ctx, agg, version, fmt.Sprintf("push-%d-%s", round, node), events.DeclarationSent{Node: node, Sequence: round,
				Digest: digest, ContentDigest: d.ContentDigest(), By: "push", Declaration: b, Signature: make([]byte, 64), Key: testKeys.Controller()}); err != nil {
				t.Fatal(err)
			}
			if last, err = s.Report(ctx, node, fmt.Sprintf("rep-%d-%s", round, node), events.DeclarationApplied{Node: node, Sequence: round, Digest: digest},
				store.Sealing{Signer: agent, MAC: testKeys.NodeMAC(node)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	return last
}

// agentKey is a node agent's key, the same for a node in every call and
// test: made from its name.
func agentKey(t *testing.T, node string) nkeys.KeyPair {
	t.Helper()
	seed := sha256.Sum256([]byte(node))
	kp, err := nkeys.CreatePairWithRand(nkeys.PrefixByteUser, bytes.NewReader(seed[:]))
	if err != nil {
		t.Fatal(err)
	}
	return kp
}

// briefPublished folds 40 nodes' enrolments and three rounds of sends
// and reports, keeps a snapshot of them, publishes it (whole and brief)
// and closes; it answers the store, a directory for read models and the
// event the snapshot holds.
func briefPublished(t *testing.T) (*store.Store, string, uint64) {
	t.Helper()
	s, dir := newStore(t), t.TempDir()
	a, held := publishRounds(t, s, dir, 1, 3)
	a.Close()
	return s, dir, held
}

// publishRounds folds rounds from to to of 40 nodes' sends and reports
// into the read models in dir/a, keeps a snapshot of them and publishes
// it; it answers the engine, still folding, and the event the snapshot
// holds.
func publishRounds(t *testing.T, s *store.Store, dir string, from, to uint64) (*Engine, uint64) {
	t.Helper()
	ctx := context.Background()
	a, _, err := Open(ctx, Options{Dir: dir + "/a", FS: vfs.Default, Store: s, Keys: testKeys})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	a.Start()
	held := pushRounds(t, s, 40, from, to)
	waitFor(t, a, held)
	if err := a.dir().TakeSnapshot(a.db, held, time.Now().UnixNano()); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Publish(ctx); err != nil {
		t.Fatal(err)
	}
	return a, held
}

// startFromBus opens read models in dir that have none of their own,
// from the snapshots on s's bus (o's other options as given); they close
// when the test ends.
func startFromBus(t *testing.T, s *store.Store, dir string, o Options) (*Engine, Opening) {
	t.Helper()
	o.Dir, o.FS, o.Store, o.Keys, o.FromPublished = dir, vfs.Default, s, testKeys, true
	e, opening, err := Open(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e, opening
}

// wantBrief fails unless o started from the brief snapshot of held, its
// history index still to come.
func wantBrief(t *testing.T, o Opening, held uint64) {
	t.Helper()
	if o.FromSnapshot != held || o.HistoryFrom != held {
		t.Fatalf("started from event %d, history missing up to %d; want both %d (the brief snapshot)", o.FromSnapshot, o.HistoryFrom, held)
	}
}

// wantWhole fails unless o started from the whole snapshot of held, none
// of its history missing.
func wantWhole(t *testing.T, o Opening, held uint64, why string) {
	t.Helper()
	if o.FromSnapshot != held || o.HistoryFrom != 0 {
		t.Fatalf("%s, started from event %d with history missing up to %d; want the whole one (%d, none missing)", why, o.FromSnapshot, o.HistoryFrom, held)
	}
}

// putBriefProven puts r as the brief snapshot of held with fields, under
// the controller key's proof of its bytes: what only a fault of the
// publisher's could put there.
func putBriefProven(t *testing.T, s *store.Store, held uint64, r io.Reader, fields map[string]string) {
	t.Helper()
	ctx := context.Background()
	st, err := s.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	bus := (&Engine{o: Options{Store: s, Keys: testKeys}, fs: vfs.Default}).bus()
	if _, err := s.PutBrief(ctx, held, r, func(digest string) map[string]string {
		f := maps.Clone(fields)
		f[published.FieldProof] = bus.ProofOf(st.Stream, f[published.FieldCreated], schemaVersion, held, digest, true)
		return f
	}); err != nil {
		t.Fatal(err)
	}
}

// historyWhole waits until e's history index is whole (fillHistory).
func historyWhole(t *testing.T, e *Engine) {
	t.Helper()
	embeddedtest.Eventually(t, "the history index filled in", func() bool {
		var from uint64
		e.view(func(r pebble.Reader) error { from = readU64(r, keyHistoryFrom); return nil })
		return from == 0
	})
}

// historyRows counts the history index's rows in the read models at path.
func historyRows(t *testing.T, path string) int {
	t.Helper()
	db, err := pebble.Open(path, &pebble.Options{FS: vfs.Default, ReadOnly: true, Logger: disk.Logger{Log: slog.New(slog.DiscardHandler)}})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	n, err := keysUnder(db, []byte{prefixHistory})
	if err != nil {
		t.Fatal(err)
	}
	return len(n)
}

// A publish puts a brief snapshot beside the whole one: the same read
// models without the history index. A controller with no read models
// starts from the brief one and serves, history answering that it is
// not here yet; then it fills the history in from the whole one, and
// ends with read models equal to a fold from the first event, which
// verify proves of them and of both snapshots on the bus.
func TestAStartFromABriefSnapshotServesThenFillsInTheHistory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, dir, held := briefPublished(t)
	whole, err := s.Snapshots(ctx)
	if err != nil || len(whole) != 1 {
		t.Fatalf("whole snapshots on the bus: %v, %v", whole, err)
	}
	briefs, err := s.Briefs(ctx)
	if err != nil || len(briefs) != 1 || briefs[0].Checkpoint != held {
		t.Fatalf("brief snapshots on the bus: %v, %v (want one of event %d)", briefs, err, held)
	}
	bus := (&Engine{o: Options{Dir: dir + "/a", Store: s, Keys: testKeys}, fs: vfs.Default}).bus()
	for _, c := range []struct {
		sn   store.Snapshot
		rows int // history rows: 40 nodes, 3 rounds, a send and a report each
	}{{whole[0], 240}, {briefs[0], 0}} {
		path := dir + "/fetched-" + c.sn.Name
		if err := bus.Fetch(ctx, c.sn, path); err != nil {
			t.Fatal(err)
		}
		if n := historyRows(t, path); n != c.rows {
			t.Fatalf("%s holds %d history rows, want %d", c.sn.Name, n, c.rows)
		}
	}
	if briefs[0].Size >= whole[0].Size {
		t.Fatalf("the brief snapshot is %d bytes, the whole one %d", briefs[0].Size, whole[0].Size)
	}
	last := pushRounds(t, s, 40, 4, 4) // the tail

	b, o := startFromBus(t, s, dir+"/b", Options{})
	wantBrief(t, o, held)
	err = b.Read(func(v *View) error { _, err := v.History("node-1", time.Time{}, time.Time{}); return err })
	if pending := (*HistoryPending)(nil); !errors.As(err, &pending) || pending.Through != held {
		t.Fatalf("history before the history index is filled in: %v, want it not here yet up to %d", err, held)
	}
	b.Start()
	waitFor(t, b, last)
	historyWhole(t, b)
	equalsAFreshFold(t, b, "read models from the brief snapshot, its history and the tail")
	if h := snapshot(t, b).History["node-1"]; len(h) != 8 {
		t.Fatalf("node-1's history holds %d rows, want 8 (4 sends, 4 reports)", len(h))
	}
	if c, found, err := b.VerifyPublished(ctx); err != nil || !found || c.Refused != "" || c.Diff != "" {
		t.Fatalf("verify of the snapshots on the bus: found %v, %+v, %v", found, c, err)
	}

	// A brief snapshot's proof names its kind: the whole one's bytes put
	// as the brief one under the whole one's proof are passed over, and a
	// start fetches the whole one.
	r, err := s.OpenSnapshot(ctx, whole[0])
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := s.PutBrief(ctx, held, r, func(string) map[string]string { return whole[0].Fields }); err != nil {
		t.Fatal(err)
	}
	_, o = startFromBus(t, s, dir+"/c", Options{})
	wantWhole(t, o, held, "with a brief snapshot under the whole one's proof")
}

// Read models without their history index neither keep a snapshot for
// time travel nor publish one (a start from it would lack the history
// for good) until the index is whole; then they do again.
func TestNothingIsKeptOrPublishedWithoutTheHistoryIndex(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, dir, held := briefPublished(t)
	b, o := startFromBus(t, s, dir+"/b", Options{SnapshotEvery: 10, PublishEvery: 10})
	wantBrief(t, o, held)
	// Nor is it verified: every history row to come would be named.
	if _, _, err := b.Verify(ctx, nil); !errors.As(err, new(*HistoryPending)) {
		t.Fatalf("verify while the history index is filled in: %v, want it not here yet", err)
	}
	_, release := b.long(ctx) // the fill waits for it, as for a rebuild
	b.Start()
	last := pushRounds(t, s, 40, 4, 4)
	waitFor(t, b, last)
	if kept := b.dir().Snapshots(); len(kept) != 0 {
		release()
		t.Fatalf("read models without their history index kept %d snapshot(s)", len(kept))
	}
	if on, err := s.Snapshots(ctx); err != nil || len(on) != 1 || on[0].Checkpoint != held {
		release()
		t.Fatalf("read models without their history index published: %v, %v", on, err)
	}
	release()
	historyWhole(t, b)
	waitFor(t, b, pushRounds(t, s, 40, 5, 5))
	embeddedtest.Eventually(t, "a snapshot kept once the history index is whole", func() bool { return len(b.dir().Snapshots()) > 0 })
}

// A whole snapshot whose bytes cannot be read (its chunks gone) leaves the
// brief one's history nothing to come from: after fillTries tries the
// controller folds every event again, and its history is whole.
func TestAnUnreadableWholeSnapshotEndsInARebuild(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, dir, held := briefPublished(t)
	// Each try waits out a read of the chunks that never come.
	s.Timeout = 2 * time.Second
	wholes, err := s.Snapshots(ctx)
	if err != nil {
		t.Fatal(err)
	}
	obs, err := s.JetStream().ObjectStore(ctx, store.SnapshotBucket)
	if err != nil {
		t.Fatal(err)
	}
	info, err := obs.GetInfo(ctx, wholes[0].Name)
	if err != nil {
		t.Fatal(err)
	}
	str, err := s.JetStream().Stream(ctx, "OBJ_"+store.SnapshotBucket)
	if err != nil {
		t.Fatal(err)
	}
	if err := str.Purge(ctx, jetstream.WithPurgeSubject("$O."+store.SnapshotBucket+".C."+info.NUID)); err != nil {
		t.Fatal(err)
	}
	b, o := startFromBus(t, s, dir+"/b", Options{})
	wantBrief(t, o, held)
	b.fillEvery = time.Millisecond
	b.Start()
	last := pushRounds(t, s, 40, 4, 4)
	waitFor(t, b, last)
	historyWhole(t, b)
	waitFor(t, b, last)
	if h := snapshot(t, b).History["node-1"]; len(h) != 8 {
		t.Fatalf("node-1's history holds %d rows after the rebuild, want 8", len(h))
	}
	if gen := b.gen; gen == disk.GenerationName(1) {
		t.Fatalf("the read models are still %s: the history came without a rebuild from an unreadable snapshot", gen)
	}
}

// Verify holds a brief snapshot to its whole one: a brief one proven by
// the controller's key whose rows are another moment's is named.
func TestVerifyNamesABriefSnapshotUnlikeItsWholeOne(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, dir, _ := briefPublished(t)
	older, err := s.Briefs(ctx)
	if err != nil || len(older) != 1 {
		t.Fatalf("briefs: %v, %v", older, err)
	}
	a, held := publishRounds(t, s, dir, 4, 4)
	if c, _, err := a.VerifyPublished(ctx); err != nil || c.Diff != "" || c.Refused != "" {
		t.Fatalf("verify of the snapshots as published: %+v, %v", c, err)
	}
	// The older brief one's bytes, proven as the newer one.
	r, err := s.OpenSnapshot(ctx, older[0])
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	putBriefProven(t, s, held, r, older[0].Fields)
	c, _, err := a.VerifyPublished(ctx)
	if err != nil || !strings.Contains(c.Diff, "brief copy") {
		t.Fatalf("verify of a brief snapshot of another moment: %+v, %v", c, err)
	}
}

// A brief snapshot proven by the controller's key that lacks its marker
// (a publisher's fault) would serve history silently missing every event
// it holds: verify names it, and a start passes it over for the whole one.
func TestABriefSnapshotWithoutItsMarkIsPassedOver(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, dir, held := briefPublished(t)
	briefs, err := s.Briefs(ctx)
	if err != nil || len(briefs) != 1 {
		t.Fatalf("briefs: %v, %v", briefs, err)
	}
	bus := (&Engine{o: Options{Dir: dir + "/a", Store: s, Keys: testKeys}, fs: vfs.Default}).bus()
	path := dir + "/unmarked"
	if err := bus.Fetch(ctx, briefs[0], path); err != nil {
		t.Fatal(err)
	}
	db, err := pebble.Open(path, &pebble.Options{FS: vfs.Default, Logger: disk.Logger{Log: slog.New(slog.DiscardHandler)}})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Delete(keyHistoryFrom, pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(db.Flush(), db.Close()); err != nil {
		t.Fatal(err)
	}
	var packed bytes.Buffer
	if err := disk.Pack(vfs.Default, path, &packed); err != nil {
		t.Fatal(err)
	}
	putBriefProven(t, s, held, &packed, briefs[0].Fields)
	b, o := startFromBus(t, s, dir+"/b", Options{})
	wantWhole(t, o, held, "with a brief snapshot without its mark")
	if h := snapshot(t, b).History["node-1"]; len(h) != 6 {
		t.Fatalf("node-1's history holds %d rows at the start, want the whole snapshot's 6", len(h))
	}
	if c, _, err := b.VerifyPublished(ctx); err != nil || !strings.Contains(c.Diff, "history index is to follow") {
		t.Fatalf("verify of a brief snapshot without its mark: %+v, %v", c, err)
	}
}
