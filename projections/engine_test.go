package projections

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/google/go-cmp/cmp"
	"github.com/meshctl/mesh/declaration"
	"github.com/meshctl/mesh/embedded/embeddedtest"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/events/store"
	"github.com/nats-io/nats.go"
)

func newStore(t *testing.T) *store.Store {
	t.Helper()
	s, _, err := store.Open(context.Background(), embeddedtest.Conn(t, embeddedtest.Server(t)), store.StreamConfig{})
	if err != nil {
		t.Fatal(err)
	}
	return keyed(s)
}

func openEngine(t *testing.T, s *store.Store, fs vfs.FS, batch int) *Engine {
	t.Helper()
	e, _, err := Open(context.Background(), Options{Dir: "proj", FS: fs, Store: s, BatchSize: batch, Keys: testKeys})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	e.Start()
	return e
}

// enrollMany appends n enrolments and retires every third node; it answers the last sequence.
func enrollMany(t *testing.T, s *store.Store, from, n int) uint64 {
	t.Helper()
	ctx := context.Background()
	var last uint64
	for i := from; i < from+n; i++ {
		name := fmt.Sprintf("node-%d", i)
		agg := events.NodeAggregate(name)
		seq, err := s.Append(ctx, agg, 0, "enroll-"+name, events.NodeEnrolled{Name: name, Capabilities: []string{"linux"}, Labels: map[string]string{"i": fmt.Sprint(i)}})
		if err != nil {
			t.Fatal(err)
		}
		if i%3 == 0 {
			if seq, err = s.Append(ctx, agg, seq, "retire-"+name, events.NodeRetired{Name: name}); err != nil {
				t.Fatal(err)
			}
		}
		last = seq
	}
	return last
}

func waitFor(t *testing.T, e *Engine, seq uint64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.WaitFor(ctx, seq); err != nil {
		t.Fatal(err)
	}
}

func snapshot(t *testing.T, e *Engine) Snapshot {
	t.Helper()
	s, err := e.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestFoldsLiveAndReadsOwnWrites(t *testing.T) {
	s := newStore(t)
	e := openEngine(t, s, vfs.NewMem(), 100)
	last := enrollMany(t, s, 0, 4)
	waitFor(t, e, last)
	nodes, err := e.Nodes()
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) != 4 || !nodes[0].Retired || nodes[1].Retired || nodes[1].Capabilities[0] != "linux" {
		t.Fatalf("nodes: %+v", nodes)
	}
	n, found, _ := e.Node("node-3")
	if !found || !n.Retired || n.Version != last {
		t.Fatalf("node-3: %+v found=%v, want retired at version %d", n, found, last)
	}
}

// A newer controller's event (rule 19): a well-formed event of a type this
// binary does not know, with the controller's MAC, on a subject only
// controllers write. The fold cannot read it and must not pass it.
func TestNewerControllersEventStopsTheFoldAndIsReported(t *testing.T) {
	s := newStore(t)
	e := openEngine(t, s, vfs.NewMem(), 100)
	good := enrollMany(t, s, 1, 2)
	data := []byte(`{"id":"x","type":"NodeTeleported","version":3,"aggregate":{"kind":"node","id":"node-1"},"data":{}}`)
	m := nats.NewMsg("mesh.ev.node.node-1.NodeTeleported")
	m.Data = data
	m.Header.Set(events.MACHeader, declaration.MAC(testKeys.LogMAC(), m.Subject, data))
	ack, err := s.JetStream().PublishMsg(context.Background(), m)
	if err != nil {
		t.Fatal(err)
	}
	after := enrollMany(t, s, 10, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = e.WaitFor(ctx, after)
	var fe *FoldError
	if !errors.As(err, &fe) || fe.Seq != ack.Sequence || !errors.Is(err, events.ErrNewer) || !strings.Contains(err.Error(), `NodeTeleported (version 3)`) {
		t.Fatalf("wait past an unknown event: %v", err)
	}
	if e.Checkpoint() != good {
		t.Fatalf("checkpoint %d: the events before the unknown one (to %d) must be folded, none after", e.Checkpoint(), good)
	}
	if _, found, _ := e.Node("node-10"); found {
		t.Fatal("an event after the unknown one was folded: the fold skipped it")
	}
	st, _ := e.Status(ctx)
	if st.Failure == "" || st.Lag != after-good {
		t.Fatalf("status does not report the stop: %+v", st)
	}
}

// A crash between batches (commits not synced, the batch in progress lost)
// reopens to read models equal to a fold from scratch.
func TestCrashBetweenBatchesEqualsRebuild(t *testing.T) {
	for _, unsynced := range []int{0, 50, 100} {
		t.Run(fmt.Sprintf("unsynced-%d%%", unsynced), func(t *testing.T) {
			s := newStore(t)
			fs := vfs.NewCrashableMem()
			e := openEngine(t, s, fs, 7)
			durable := enrollMany(t, s, 0, 20)
			waitFor(t, e, durable)
			// A memtable flush makes what was folded so far durable; what
			// follows lives only in unsynced commits when the crash comes.
			if err := e.db.Flush(); err != nil {
				t.Fatal(err)
			}
			waitFor(t, e, enrollMany(t, s, 20, 20))
			crashed := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: unsynced, RNG: rand.New(rand.NewPCG(1, uint64(unsynced)))})
			last := enrollMany(t, s, 40, 20)

			reopened, o, err := Open(context.Background(), Options{Dir: "proj", FS: crashed, Store: s, BatchSize: 7, Keys: testKeys})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { reopened.Close() })
			if o.Checkpoint < durable {
				t.Fatalf("after the crash the checkpoint is %d, below the durable %d", o.Checkpoint, durable)
			}
			t.Logf("crash kept the fold up to %d; durable %d, last %d", o.Checkpoint, durable, last)
			reopened.Start()
			waitFor(t, reopened, last)
			scratch := openEngine(t, s, vfs.NewMem(), 1000)
			waitFor(t, scratch, last)
			if diff := cmp.Diff(snapshot(t, scratch), snapshot(t, reopened)); diff != "" {
				t.Fatalf("reopened after a crash differs from a fold from scratch (-scratch +reopened):\n%s", diff)
			}
		})
	}
}

func TestRebuildEqualsLiveAndKeepsFollowing(t *testing.T) {
	s := newStore(t)
	fs := vfs.NewMem()
	e := openEngine(t, s, fs, 5)
	last := enrollMany(t, s, 0, 40)
	waitFor(t, e, last)
	before := snapshot(t, e)
	var reports int
	r, err := e.Rebuild(context.Background(), func(Progress) { reports++ })
	if err != nil {
		t.Fatal(err)
	}
	if r.From == r.To || reports == 0 {
		t.Fatalf("rebuild %+v reported progress %d times", r, reports)
	}
	if diff := cmp.Diff(before, snapshot(t, e)); diff != "" {
		t.Fatalf("rebuild differs from live (-live +rebuilt):\n%s", diff)
	}
	if _, err := fs.Stat(fs.PathJoin("proj", r.From)); err == nil {
		t.Fatalf("the replaced generation %s was left behind", r.From)
	}
	more := enrollMany(t, s, 40, 3)
	waitFor(t, e, more)
	if _, found, _ := e.Node("node-42"); !found {
		t.Fatal("after a rebuild the live fold stopped following")
	}
}

// Events appended while a rebuild reads the stream are folded into the new
// generation, and the rebuild does not take them for read models ahead of
// the stream. Fails when the check against the stream uses its state from
// before the rebuild began (as it did: "ahead of the stream").
func TestARebuildWhileTheStreamGrows(t *testing.T) {
	s := newStore(t)
	e := openEngine(t, s, vfs.NewMem(), 5)
	waitFor(t, e, enrollMany(t, s, 0, 40))
	var more uint64
	if _, err := e.Rebuild(context.Background(), func(Progress) {
		if more == 0 {
			more = enrollMany(t, s, 40, 3)
		}
	}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, e, more)
	if _, found, _ := e.Node("node-42"); more == 0 || !found {
		t.Fatalf("the events appended during the rebuild (up to %d) are not folded", more)
	}
}

// A rebuilt generation is folded without a WAL; a crash the moment the
// rebuild returns (nothing unsynced survives it) must still find it whole
// under CURRENT, not an empty generation or the replaced one.
func TestCrashAfterRebuildKeepsTheRebuiltGeneration(t *testing.T) {
	s := newStore(t)
	fs := vfs.NewCrashableMem()
	e := openEngine(t, s, fs, 5)
	last := enrollMany(t, s, 0, 30)
	waitFor(t, e, last)
	r, err := e.Rebuild(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := snapshot(t, e)
	crashed := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	reopened, o, err := Open(context.Background(), Options{Dir: "proj", FS: crashed, Store: s, Keys: testKeys})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reopened.Close() })
	if o.Generation != r.To || o.Checkpoint != last {
		t.Fatalf("after a crash: generation %s at event %d; the rebuild made %s at event %d", o.Generation, o.Checkpoint, r.To, last)
	}
	if diff := cmp.Diff(want, snapshot(t, reopened)); diff != "" {
		t.Fatalf("the rebuilt generation after a crash differs (-before +after):\n%s", diff)
	}
}

func TestReadModelsOfAnotherStreamAreRefused(t *testing.T) {
	ctx := context.Background()
	fs := vfs.NewMem()
	first := newStore(t)
	e := openEngine(t, first, fs, 10)
	waitFor(t, e, enrollMany(t, first, 0, 3))
	e.Close()

	// Another bus with a stream of the same name: a reset or restored bus.
	other := newStore(t)
	_, _, err := Open(ctx, Options{Dir: "proj", FS: fs, Store: other, Keys: testKeys})
	if !errors.Is(err, ErrForeignStream) || !strings.Contains(err.Error(), "folded again") {
		t.Fatalf("open on another stream: %v", err)
	}
	// Reset folds them again from the stream it is now on.
	e2, o, err := Open(ctx, Options{Dir: "proj", FS: fs, Store: other, Reset: true, Keys: testKeys})
	if err != nil || !o.Fresh || o.Nodes != 0 {
		t.Fatalf("reset: %+v %v", o, err)
	}
	e2.Close()
}

func TestReadModelsAheadOfTheStreamAreRefused(t *testing.T) {
	ctx := context.Background()
	fs := vfs.NewMem()
	s := newStore(t)
	e := openEngine(t, s, fs, 10)
	last := enrollMany(t, s, 0, 2)
	waitFor(t, e, last)
	// As after a restore from an older backup: the checkpoint is past the end.
	if err := e.db.Set(keyCheckpoint, u64(last+10), pebble.Sync); err != nil {
		t.Fatal(err)
	}
	e.Close()
	_, _, err := Open(ctx, Options{Dir: "proj", FS: fs, Store: s, Keys: testKeys})
	if !errors.Is(err, ErrRewound) {
		t.Fatalf("open ahead of the stream: %v", err)
	}
}

// catalogueEvents registers two modules, assigns and unassigns, and
// re-registers one (a new build): every kind of catalogue event.
func catalogueEvents(t *testing.T, s *store.Store) uint64 {
	t.Helper()
	ctx := context.Background()
	app := events.ModuleAggregate("app")
	v, err := s.Append(ctx, app, 0, "reg-app-1", events.ModuleRegistered{Module: "app", Build: "b1", Manifest: []byte(`{"module":"app"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, app, v, "reg-app-2", events.ModuleRegistered{Module: "app", Build: "b2", Manifest: []byte(`{"module":"app","requires":["linux"]}`)}); err != nil {
		t.Fatal(err)
	}
	var last uint64
	for _, n := range []string{"web-1", "web-2"} {
		agg := events.NodeAggregate(n)
		v, err := s.Append(ctx, agg, 0, "enroll-"+n, events.NodeEnrolled{Name: n})
		if err != nil {
			t.Fatal(err)
		}
		if v, err = s.Append(ctx, agg, v, "assign-"+n, events.ModuleAssigned{Node: n, Module: "app", Build: "b2", Settings: map[string]string{"k": n}}); err != nil {
			t.Fatal(err)
		}
		last = v
	}
	last, err = s.Append(ctx, events.NodeAggregate("web-2"), last, "unassign-web-2", events.ModuleUnassigned{Node: "web-2", Module: "app"})
	if err != nil {
		t.Fatal(err)
	}
	return last
}

func TestCatalogueFoldsAndRebuildsEqual(t *testing.T) {
	s := newStore(t)
	e := openEngine(t, s, vfs.NewMem(), 3)
	last := catalogueEvents(t, s)
	waitFor(t, e, last)
	live := snapshot(t, e)
	if len(live.Modules) != 1 || live.Modules[0].Latest != "b2" || len(live.Modules[0].Builds) != 2 {
		t.Fatalf("catalogue: %+v", live.Modules)
	}
	if len(live.Assignments) != 1 || live.Assignments[0].Node != "web-1" || live.Assignments[0].Settings["k"] != "web-1" {
		t.Fatalf("assignments: %+v", live.Assignments)
	}
	if got := live.ByModule["app"]; len(got) != 1 || got[0] != "web-1" {
		t.Fatalf("where app is assigned: %v", got)
	}
	if live.Manifests["app/b1"] != `{"module":"app"}` {
		t.Fatalf("manifest bytes not kept exactly: %q", live.Manifests["app/b1"])
	}
	if _, err := e.Rebuild(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(live, snapshot(t, e)); diff != "" {
		t.Fatalf("rebuild differs from live (-live +rebuilt):\n%s", diff)
	}
}

func TestAnotherSchemaIsFoldedAgain(t *testing.T) {
	ctx := context.Background()
	fs := vfs.NewMem()
	s := newStore(t)
	e := openEngine(t, s, fs, 10)
	last := enrollMany(t, s, 0, 3)
	waitFor(t, e, last)
	if err := e.db.Set(keySchema, u64(schemaVersion-1), pebble.Sync); err != nil {
		t.Fatal(err)
	}
	e.Close()
	e2, o, err := Open(ctx, Options{Dir: "proj", FS: fs, Store: s, Keys: testKeys})
	if err != nil || !o.Fresh {
		t.Fatalf("open over another schema: %+v %v", o, err)
	}
	defer e2.Close()
	e2.Start()
	waitFor(t, e2, last)
	if n, _ := e2.Nodes(); len(n) != 3 {
		t.Fatalf("refolded %d nodes, want 3", len(n))
	}
}

func TestVerifyAndFoldCopy(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	e := openEngine(t, s, vfs.NewMem(), 4)
	mid := enrollMany(t, s, 0, 5)
	waitFor(t, e, mid)
	cut := time.Now()
	s.Now = func() time.Time { return cut.Add(time.Hour) } // what follows is after cut, on the injected clock
	last := enrollMany(t, s, 5, 5)
	waitFor(t, e, last)
	if diff, at, err := e.Verify(ctx, nil); err != nil || diff != "" || at != last {
		t.Fatalf("verify: at %d, err %v, diff:\n%s", at, err, diff)
	}
	// Break the live read models behind the engine's back: verify says so.
	if err := e.db.Delete(nodeKey("node-1"), pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if diff, _, err := e.Verify(ctx, nil); err != nil || !strings.Contains(diff, "node-1") {
		t.Fatalf("verify after damage: %v\n%s", err, diff)
	}
	past, err := e.FoldCopy(ctx, 0, cut)
	if err != nil {
		t.Fatal(err)
	}
	defer past.Close()
	if nodes, _ := past.Nodes(); len(nodes) != 5 || past.Checkpoint() != mid {
		t.Fatalf("as of the cut: %d nodes at %d, want 5 at %d", len(nodes), past.Checkpoint(), mid)
	}
}

// The composition version is the newest event that can change a
// composition, whatever batch it was folded in, and other events (a send, a
// report) leave it where it was.
func TestCompositionVersionMovesOnlyWithComposition(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	e := openEngine(t, s, vfs.NewMem(), 4)
	version := func() (v uint64) {
		e.Read(func(view *View) error { v = view.CompositionVersion(); return nil })
		return v
	}
	enrolled := enrollMany(t, s, 0, 9) // several batches of 4
	waitFor(t, e, enrolled)
	if got := version(); got != enrolled {
		t.Fatalf("composition version %d after enrolments up to %d", got, enrolled)
	}
	at, err := s.Version(ctx, events.NodeAggregate("node-1"))
	if err != nil {
		t.Fatal(err)
	}
	sent, err := s.Append(ctx, events.NodeAggregate("node-1"), at, "send-1",
		events.DeclarationSent{Node: "node-1", Sequence: 1, Digest: "d", ContentDigest: "c", By: "push"})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, e, sent)
	if got := version(); got != enrolled {
		t.Fatalf("a send moved the composition version to %d (want %d)", got, enrolled)
	}
}
