package projections

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/google/go-cmp/cmp"
	"github.com/meshctl/mesh/embedded/embeddedtest"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/events/store"
	"github.com/meshctl/mesh/projections/rows"
)

// fromMemory reads every node row of one view from the live fold's
// memory and from Pebble, and fails when both read and they differ: a
// view that mixed the memory of one commit with Pebble of another. It
// answers whether the memory was read.
func fromMemory(t *testing.T, e *Engine, brief bool) bool {
	t.Helper()
	used, err := readBoth(e, brief)
	if err != nil {
		t.Fatal(err)
	}
	return used
}

// readBoth is fromMemory's read, its failure answered rather than
// failing the test: for a goroutine other than the test's.
func readBoth(e *Engine, brief bool) (used bool, err error) {
	err = e.Read(func(v *View) error {
		mem, ok, err := v.nodesFromMemory(brief)
		if err != nil || !ok {
			return err
		}
		used = true
		disk, err := nodeRows(v.r, brief)
		if err != nil {
			return err
		}
		if diff := cmp.Diff(disk, mem); diff != "" {
			return fmt.Errorf("the memory of node rows differs from Pebble's at checkpoint %d (-pebble +memory):\n%s", v.Checkpoint(), diff)
		}
		// Handed one at a time (EachNode), the same rows.
		if !brief {
			return nil
		}
		return handedAgree(v, disk)
	})
	return used, err
}

// handedAgree fails unless the rows EachNode hands, decoded in runs into
// an arena a run or two in turn, are disk's (brief), in order: each is
// compared while it is handed, since a later run writes over it.
func handedAgree(v *View, disk []Node) error {
	for _, keep := range []bool{false, true} {
		i := 0
		err := v.EachNode(keep, func(n Node) error {
			if i >= len(disk) {
				return fmt.Errorf("more rows handed than Pebble holds (%d)", len(disk))
			}
			if diff := cmp.Diff(disk[i], n); diff != "" {
				return fmt.Errorf("row %d (-pebble +handed):\n%s", i, diff)
			}
			i++
			return nil
		})
		if err == nil && i != len(disk) {
			err = fmt.Errorf("%d rows handed, Pebble holds %d", i, len(disk))
		}
		if err != nil {
			return fmt.Errorf("the rows handed in runs (keep %v) differ from Pebble's at checkpoint %d: %w", keep, v.Checkpoint(), err)
		}
	}
	return nil
}

// More rows than a run, handed from the memory of a quiet fold, are
// Pebble's, whether each run has an arena or one serves them all. Fails
// when EachNode hands a row other than Pebble's, and when the view did
// not read the memory (the test would hold Pebble to itself).
func TestEachNodeFromMemoryIsPebblesAcrossRuns(t *testing.T) {
	s := newStore(t)
	e := openEngine(t, s, vfs.NewMem(), DefaultBatchSize)
	waitFor(t, e, enrollMany(t, s, 0, rows.Run+40))
	embeddedtest.Eventually(t, "views reading the memory of node rows", func() bool { return fromMemory(t, e, true) })
	err := e.Read(func(v *View) error {
		if _, held, ok := v.heldRows(); !ok || len(held) <= rows.Run {
			return fmt.Errorf("the view read %d rows from the memory (ok %v), want more than a run of %d from it", len(held), ok, rows.Run)
		}
		disk, err := nodeRows(v.r, true)
		if err != nil {
			return err
		}
		return handedAgree(v, disk)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// changeMany moves every node of enrollMany's: a label change on each,
// then a retirement of every fifth not retired yet, once e has folded
// everything before; it answers the last sequence.
func changeMany(t *testing.T, s *store.Store, e *Engine, n int, round int) uint64 {
	t.Helper()
	ctx := context.Background()
	var last uint64
	for i := range n {
		name := fmt.Sprintf("node-%d", i)
		row, _, err := e.Node(name)
		if err != nil {
			t.Fatal(err)
		}
		// The caller waited for the fold: the row's version is the
		// node's last event.
		agg := events.NodeAggregate(name)
		seq, err := s.Append(ctx, agg, row.Version, fmt.Sprintf("change-%s-%d", name, round), events.NodeChanged{Name: name, Capabilities: []string{"linux"}, Labels: map[string]string{"round": fmt.Sprint(round)}})
		if err != nil {
			t.Fatal(err)
		}
		last = seq
		if i%5 == 0 && !row.Retired {
			if last, err = s.Append(ctx, agg, seq, fmt.Sprintf("retire-%s-%d", name, round), events.NodeRetired{Name: name}); err != nil {
				t.Fatal(err)
			}
		}
	}
	return last
}

// The views status reads its node rows through agree with Pebble at every
// moment: while the fold commits (every view read at once while events
// are folded), after a restart (whose memory is filled before it folds), and
// after a rebuild (a new generation, a new fold). Fails when a commit
// changes the memory outside the lock views take their snapshot under,
// when the memory is not refilled after a restart (before anything new is
// folded) or rebuild, or when a
// view reads a memory that moved past its snapshot.
func TestNodesFromMemoryAgreeWithPebble(t *testing.T) {
	s := newStore(t)
	fs := vfs.NewMem()
	e := openEngine(t, s, fs, 3)
	last := enrollMany(t, s, 0, 30)
	waitFor(t, e, last)
	embeddedtest.Eventually(t, "views reading the memory of node rows", func() bool { return fromMemory(t, e, false) })

	// Views read while the fold commits small batches: each must agree,
	// whichever of memory or Pebble it read.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var read, fromMem int
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			read++
			used, err := readBoth(e, read%2 == 0)
			if err != nil {
				t.Error(err)
				return
			}
			if used {
				fromMem++
			}
		}
	})
	for round := range 3 {
		waitFor(t, e, last)
		last = changeMany(t, s, e, 30, round)
	}
	last = enrollMany(t, s, 30, 10)
	waitFor(t, e, last)
	close(stop)
	wg.Wait()
	t.Logf("%d views read while folding, %d from the memory", read, fromMem)
	if !fromMemory(t, e, true) {
		t.Fatal("a caught-up fold's views do not read the memory of node rows")
	}

	// A view held while the fold commits more reads its own moment, not
	// the memory that moved past it.
	err := e.Read(func(v *View) error {
		before, err := nodeRows(v.r, false)
		if err != nil {
			return err
		}
		waitFor(t, e, changeMany(t, s, e, 3, 5))
		if _, ok, _ := v.nodesFromMemory(false); ok {
			t.Error("a view read the memory of a later commit than its snapshot's")
		}
		now, err := v.Nodes()
		if diff := cmp.Diff(before, now); diff != "" {
			t.Errorf("a view's node rows moved with the fold (-at its snapshot +read later):\n%s", diff)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	last = e.Checkpoint()

	// A restart: the memory is filled before the fold folds anything, so
	// the views of a mesh with nothing new to fold read it too (a fleet
	// lost says nothing, and its statuses read every row from Pebble).
	e.Close()
	e = openEngine(t, s, fs, 3)
	waitFor(t, e, last)
	embeddedtest.Eventually(t, "views reading the memory after a restart, with nothing new folded", func() bool { return fromMemory(t, e, false) })
	if e.Checkpoint() != last {
		t.Fatalf("the restarted fold folded up to %d with nothing new past %d", e.Checkpoint(), last)
	}
	last = changeMany(t, s, e, 2, 9)
	waitFor(t, e, last)
	embeddedtest.Eventually(t, "views reading the memory after a restart", func() bool { return fromMemory(t, e, false) })
	nodes, err := e.Nodes()
	if err != nil || len(nodes) != 40 || nodes[1].Labels["round"] != "9" {
		t.Fatalf("after a restart: %d nodes, %v; node-1 %+v", len(nodes), err, nodes[1])
	}

	// A rebuild: a new generation, whose live fold remembers its rows.
	if _, err := e.Rebuild(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	last = changeMany(t, s, e, 2, 10)
	waitFor(t, e, last)
	embeddedtest.Eventually(t, "views reading the memory after a rebuild", func() bool { return fromMemory(t, e, false) })
}

// What moved composition since a version from before the live fold
// started again on its generation (Refollow, after a bus restart) is
// known (View.MovedBetween) when nothing moved it between that version
// and the new start: a world composed then is patched by the next change
// rather than composed again whole (1.1 CPU s at 100,000 nodes). Not
// after a rebuild, which repairs: a world composed from the rows it
// replaced is read again whole. A span from before the last move the
// fold started after is never said.
func TestMovesAreKnownAcrossARestartOfTheFoldNotARebuild(t *testing.T) {
	s := newStore(t)
	e := openEngine(t, s, vfs.NewMem(), 3)
	waitFor(t, e, enrollMany(t, s, 0, 6))
	moved := func(from uint64) (nodes map[string]bool, ok bool, now uint64) {
		t.Helper()
		if err := e.Read(func(v *View) error {
			now = v.CompositionVersion()
			nodes, ok = v.MovedBetween(from, now)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return nodes, ok, now
	}
	_, _, composed := moved(0)
	// Events that move no composition between: the fold starts after them.
	waitFor(t, e, reportEach(t, s, "node-1"))
	e.Refollow()
	waitFor(t, e, changeOne(t, s, e, "node-2"))
	if nodes, ok, _ := moved(composed); !ok || len(nodes) != 1 || !nodes["node-2"] {
		t.Fatalf("after the fold started again, the moves since %d: %v %v, want node-2's", composed, nodes, ok)
	}
	if _, ok, _ := moved(composed - 1); ok {
		t.Fatal("a span from before the last move the fold started after was said")
	}

	_, _, composed = moved(0)
	if _, err := e.Rebuild(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	waitFor(t, e, changeOne(t, s, e, "node-4"))
	if nodes, ok, _ := moved(composed); ok {
		t.Fatalf("after a rebuild, the moves since %d before it were said (%v): a world of the replaced rows would be patched", composed, nodes)
	}
}

// changeOne changes one node's labels once e has folded its row, and
// answers the event's sequence.
func changeOne(t *testing.T, s *store.Store, e *Engine, name string) uint64 {
	t.Helper()
	row, _, err := e.Node(name)
	if err != nil {
		t.Fatal(err)
	}
	seq, err := s.Append(context.Background(), events.NodeAggregate(name), row.Version, "change-one-"+name, events.NodeChanged{Name: name, Capabilities: []string{"linux"}, Labels: map[string]string{"one": name}})
	if err != nil {
		t.Fatal(err)
	}
	return seq
}
