package projections

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/google/go-cmp/cmp"
)

// Time travel from a snapshot answers exactly what a fold from the
// stream's start answers, at every moment; a moment before every
// snapshot's latest event is folded from the start.
func TestTimeTravelFromSnapshots(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	// One second per event, from a fixed start: the moments asked about
	// fall between known events, with no sleeping.
	base := time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)
	var tick atomic.Int64
	s.Now = func() time.Time { return base.Add(time.Duration(tick.Add(1)) * time.Second) }

	dir := t.TempDir()
	e, _, err := Open(ctx, Options{Dir: dir + "/proj", FS: vfs.Default, Store: s, BatchSize: 3, Keys: testKeys, SnapshotEvery: 10})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	e.Start()
	// A commit holds what one read delivered (a chunk), and a snapshot is
	// taken at a commit: events written faster than the fold reads them
	// arrive in one chunk and leave one snapshot. Five at a time, each
	// folded before the next, commit at least every few events.
	var last uint64
	for i := 0; i < 40; i += 5 {
		last = enrollMany(t, s, i, 5)
		waitFor(t, e, last)
	}
	snaps := e.dir().Snapshots()
	if len(snaps) < 3 {
		t.Fatalf("%d snapshot(s) after %d events, one every 10 wanted", len(snaps), last)
	}

	// The same stream folded by an engine without snapshots: from the start.
	full, _, err := Open(ctx, Options{Dir: dir + "/full", FS: vfs.Default, Store: s, BatchSize: 3, Keys: testKeys})
	if err != nil {
		t.Fatal(err)
	}
	defer full.Close()
	first := time.Unix(0, snaps[0].Latest)
	for _, at := range []time.Time{first.Add(-3 * time.Second), first, first.Add(7 * time.Second), time.Unix(0, snaps[len(snaps)-1].Latest).Add(2 * time.Second), base.Add(time.Hour)} {
		want, err := full.FoldCopy(ctx, 0, at)
		if err != nil {
			t.Fatal(err)
		}
		from, err := e.copyFromSnapshot(ctx, at)
		if err != nil {
			t.Fatal(err)
		}
		if at.Before(first) {
			if from != nil {
				t.Fatalf("a moment before every snapshot (%s) was answered from one", at)
			}
			want.Close()
			continue
		}
		if from == nil {
			t.Fatalf("no snapshot answered %s, after the first snapshot's latest event", at)
		}
		if d := cmp.Diff(snapshot(t, want), snapshot(t, from)); d != "" {
			t.Fatalf("as of %s, from a snapshot differs from a fold from the start:\n%s", at, d)
		}
		want.Close()
		from.Close()
	}
	// A copy's directory goes with it; the snapshots stay.
	if names, _ := vfs.Default.List(e.dir().SnapshotsDir()); len(names) != len(e.dir().Snapshots()) {
		t.Fatalf("the snapshots directory holds %v after every copy closed", names)
	}
}
