package projections

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/google/go-cmp/cmp"
	"github.com/meshctl/mesh/events"
	"github.com/nats-io/nats.go/jetstream"
)

// A node's liveness row says its newest change, read alone or with every
// other's, and a foreign message on its aggregate's subjects moves its
// version (followVersion): the next change expects the stream's last
// sequence for the node's liveness, and a row left behind would make
// every later change conflict, so a node once lost would read lost for
// ever. The rows are in the compact form (rows/liveness.go).
func TestLivenessRowsFoldAndFollowTheirVersion(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	e := openEngine(t, s, vfs.NewMem(), 1)
	// Liveness is admitted only of an enrolled node (admit).
	if _, err := s.Append(ctx, events.NodeAggregate("web-1"), 0, "enrol-1", events.NodeEnrolled{Name: "web-1", Capabilities: []string{}, Labels: map[string]string{}}); err != nil {
		t.Fatal(err)
	}
	agg := events.LivenessAggregate("web-1")
	heard := time.Date(2026, 12, 6, 21, 0, 0, 0, time.UTC)
	lost, err := s.Append(ctx, agg, 0, "lost-1", events.NodeUnreachable{Node: "web-1", LastHeard: heard, Bound: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, e, lost)
	var all Lives
	var one, none Liveness
	read := func() {
		t.Helper()
		err := e.Read(func(v *View) (err error) {
			if all, err = v.Liveness(); err != nil {
				return err
			}
			if one, err = v.NodeLiveness("web-1"); err != nil {
				return err
			}
			none, err = v.NodeLiveness("web-2")
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	read()
	if !one.Unreachable || one.Node != "web-1" || !one.LastHeard.Equal(heard) || one.Bound != 20*time.Second || one.Version != lost || one.Since.IsZero() {
		t.Fatalf("the row of a node recorded lost: %+v", one)
	}
	if diff := cmp.Diff(Lives{one}, all); diff != "" {
		t.Fatalf("every row (-want +got):\n%s", diff)
	}
	if none.Unreachable || none.Version != 0 {
		t.Fatalf("a node never lost reads %+v: want reachable at version 0", none)
	}

	js, err := jetstream.New(s.NC())
	if err != nil {
		t.Fatal(err)
	}
	ack, err := js.Publish(ctx, agg.Subject("NodeReachable"), []byte("not an event"))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, e, ack.Sequence)
	read()
	if !one.Unreachable || one.Version != ack.Sequence {
		t.Fatalf("after a foreign message at %d the row reads %+v: its version must move, and only it", ack.Sequence, one)
	}
	back, err := s.Append(ctx, agg, one.Version, "back-1", events.NodeReachable{Node: "web-1", Heard: heard.Add(time.Minute)})
	if err != nil {
		t.Fatalf("the change after a foreign message, expecting the row's version: %v", err)
	}
	waitFor(t, e, back)
	read()
	if one.Unreachable || !one.LastHeard.Equal(heard.Add(time.Minute)) || one.Version != back {
		t.Fatalf("the row of a node heard again: %+v", one)
	}
}

// A node's row is found in every row whatever order it is asked in: by a
// search, and by a walk, which steps forward for names asked in order and
// searches for one asked out of it. Fails when a walk asked out of order
// answers a node lost as reachable.
func TestLivesAreFoundInAnyOrder(t *testing.T) {
	var lives Lives
	for _, n := range []string{"a", "b-1", "b-2", "d", "f"} {
		lives = append(lives, Liveness{Node: n, Unreachable: true, Version: uint64(len(n))})
	}
	asked := []string{"", "a", "b", "b-1", "b-2", "c", "d", "e", "f", "g"}
	want := func(n string) bool { return slices.ContainsFunc(lives, func(l Liveness) bool { return l.Node == n }) }
	for _, order := range [][]string{asked, {"g", "f", "d", "a"}, {"b-2", "a", "f", "b-1", "d", "d", "c"}} {
		w := lives.Walk()
		for _, n := range order {
			if got := lives.Of(n); got.Unreachable != want(n) || got.Unreachable && got.Node != n {
				t.Fatalf("Of(%q) = %+v", n, got)
			}
			if got := w.Of(n); got.Unreachable != want(n) || got.Unreachable && got.Node != n {
				t.Fatalf("asked in the order %q, the walk's %q = %+v", order, n, got)
			}
		}
	}
}
