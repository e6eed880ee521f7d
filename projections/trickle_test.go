package projections

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/meshctl/mesh/embedded/embeddedtest"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/events/store"
	"github.com/nats-io/nats.go"
)

// openTrickling starts read models whose live fold's clock is frozen: every
// caught-up commit falls within the window of the last and is deferred,
// so each test sees only the way it means to reach a commit.
func openTrickling(t *testing.T, s *store.Store, fs vfs.FS, window time.Duration, heard func(Heard)) *Engine {
	t.Helper()
	e, _, err := Open(context.Background(), Options{Dir: "proj", FS: fs, Store: s, Keys: testKeys, Heard: heard})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	frozen := time.Now()
	e.now = func() time.Time { return frozen }
	e.window = window
	e.Start()
	return e
}

// One event trickles in and no other follows: its deferred commit is made
// when the window ends, with nobody waiting for it.
func TestATrickledEventIsCommittedWithoutAnother(t *testing.T) {
	s := newStore(t)
	e := openTrickling(t, s, vfs.NewMem(), time.Millisecond, nil)
	seq := enrollMany(t, s, 1, 1)
	var cp uint64
	embeddedtest.Eventually(t, "node-1 read through the read models", func() bool {
		found := false
		err := e.Read(func(v *View) (err error) {
			_, found, err = v.Node("node-1")
			cp = v.Checkpoint()
			return err
		})
		return found && err == nil
	})
	if cp != seq {
		t.Fatalf("checkpoint %d beside node-1's row, want %d", cp, seq)
	}
}

// A command waits for the event it appended: the window, an hour here,
// never holds it back.
func TestAWaiterIsNotHeldByTheWindow(t *testing.T) {
	s := newStore(t)
	e := openTrickling(t, s, vfs.NewMem(), time.Hour, nil)
	for i := range 5 {
		seq := enrollMany(t, s, 10+i, 1)
		waitFor(t, e, seq)
		if name := fmt.Sprintf("node-%d", 10+i); !found(e, name) {
			t.Fatalf("event %d waited for is folded, but %s is not read", seq, name)
		}
	}
}

func found(e *Engine, node string) bool {
	_, found, err := e.Node(node)
	return found && err == nil
}

// A fold stopped within the window commits what it applied: the next one
// starts after it, so no event is applied twice, and none is lost.
func TestAStopWithinTheWindowCommitsWhatWasApplied(t *testing.T) {
	s := newStore(t)
	fs := vfs.NewMem()
	heard := make(chan Heard, 1)
	e := openTrickling(t, s, fs, time.Hour, func(h Heard) { heard <- h })
	enrolled := enrollMany(t, s, 1, 1)
	seq := foreignReport(t, s, heard)
	if cp := e.Checkpoint(); cp >= seq {
		t.Fatalf("checkpoint %d: the report was committed before the stop, so this test proves nothing", cp)
	}
	e.Stop()
	if cp := e.Checkpoint(); cp != seq {
		t.Fatalf("checkpoint %d after the stop, want %d: what was applied must be committed", cp, seq)
	}
	if !found(e, "node-1") {
		t.Fatalf("node-1's enrolment (event %d) is not read after the stop", enrolled)
	}
	if err := e.Read(func(v *View) error {
		if open, _, err := v.OpenForeign(); err != nil || open != 1 {
			t.Errorf("%d foreign message(s) after the stop (%v), want the one report", open, err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	e.Close()
	again, o, err := Open(context.Background(), Options{Dir: "proj", FS: fs, Store: s, Keys: testKeys})
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if o.Checkpoint != seq {
		t.Fatalf("reopened at checkpoint %d, want %d: the next fold would apply events again", o.Checkpoint, seq)
	}
}

// foreignReport publishes a report that is not its node's (no MAC), which
// the fold sets aside as foreign, and answers its sequence once the fold
// has applied it: heard is told as it is.
func foreignReport(t *testing.T, s *store.Store, heard chan Heard) uint64 {
	t.Helper()
	m := nats.NewMsg(events.ReportSubject("node-1", "DeclarationApplied"))
	m.Data = []byte(`{}`)
	ack, err := s.JetStream().PublishMsg(context.Background(), m)
	if err != nil {
		t.Fatal(err)
	}
	if h := <-heard; h.Node != "node-1" || !h.Foreign {
		t.Fatalf("heard %+v, want node-1's foreign report", h)
	}
	return ack.Sequence
}

// A command that waits for an event the fold applied before anyone waited
// (its commit deferred, the fold idle): the waiter wakes the fold, which
// commits at once.
func TestAWaiterWakesAFoldHoldingItsEvent(t *testing.T) {
	s := newStore(t)
	heard := make(chan Heard, 1)
	e := openTrickling(t, s, vfs.NewMem(), time.Hour, func(h Heard) { heard <- h })
	// The fold is inside the report's apply when heard; it takes a wake
	// only between chunks, after deferring the commit. The second send
	// returns once it took the first; the test takes the second back, so
	// that the waiter's own wake is the next the fold gets. The fold may
	// still be handling the first as the waiter comes, and commit for it,
	// so a waiter that wakes nobody passes here now and then: the next
	// test shows that it wakes the fold.
	for range 5 {
		seq := foreignReport(t, s, heard)
		e.wake <- struct{}{}
		e.wake <- struct{}{}
		select {
		case <-e.wake:
		default:
		}
		if cp := e.Checkpoint(); cp >= seq {
			t.Fatalf("checkpoint %d: the report was committed before anyone waited, so this test proves nothing", cp)
		}
		waitFor(t, e, seq)
	}
}

// A waiter for an event not folded says what it waits for and wakes the
// fold (not started here, so the wake stays for the test to see).
func TestAWaiterTellsTheFold(t *testing.T) {
	s := newStore(t)
	e, _, err := Open(context.Background(), Options{Dir: "proj", FS: vfs.NewMem(), Store: s, Keys: testKeys})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx, cancel := context.WithCancel(context.Background())
	waited := make(chan error, 1)
	go func() { waited <- e.WaitFor(ctx, 7) }()
	embeddedtest.Eventually(t, "the waiter's wake", func() bool { return len(e.wake) == 1 && e.wanted.Load() == 7 })
	cancel()
	if err := <-waited; err == nil {
		t.Fatal("event 7 was never appended, yet the wait for it ended well")
	}
}
