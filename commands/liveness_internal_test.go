package commands

import (
	"context"
	"testing"
	"time"

	"github.com/meshctl/mesh/aggregates"
	"github.com/meshctl/mesh/events"

	"github.com/meshctl/mesh/embedded/embeddedtest"
	"github.com/meshctl/mesh/projections"
)

// Silence counts only while this controller could hear: a gap between
// its checks (a SIGSTOP, a paused VM) left every beat unread, and calling
// every node lost then wrote a loss and a return for each of them. After
// the gap, silence counts from the check that noticed it; a node silent
// past the bound from there is lost, and one recorded lost and heard
// since comes back.
func TestSilenceCountsOnlyWhileTheControllerRan(t *testing.T) {
	nc := embeddedtest.Conn(t, embeddedtest.Server(t))
	t0 := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	l := &liveness{bound: 20 * time.Second, nc: nc, heard: map[string]beat{"web-1": {at: t0}},
		lost:  map[string]projections.Liveness{"db-1": {Node: "db-1", Unreachable: true, Since: t0.Add(-time.Hour)}},
		known: map[string]time.Time{}, hearing: t0, reconnects: nc.Stats().Reconnects, checked: time.Now()}
	names := func(cs []change) (out []string) {
		for _, c := range cs {
			out = append(out, c.node+" "+c.ev.EventType())
		}
		return out
	}
	// The process stood still for ten seconds, the clock ran on 25.
	l.checked = time.Now().Add(-10 * time.Second)
	if got := names(l.changes(t0.Add(25 * time.Second))); len(got) != 0 {
		t.Fatalf("after a stall: %v, want no change", got)
	}
	// Running again: web-1 is silent for the bound from then.
	if got := names(l.changes(t0.Add(40 * time.Second))); len(got) != 0 {
		t.Fatalf("within the bound after the stall: %v", got)
	}
	if got := names(l.changes(t0.Add(46 * time.Second))); len(got) != 1 || got[0] != "web-1 NodeUnreachable" {
		t.Fatalf("past the bound after the stall: %v, want web-1 lost", got)
	}
	// db-1, recorded lost an hour ago, is heard: it comes back.
	l.heard["db-1"] = beat{at: t0.Add(47 * time.Second)}
	if got := names(l.changes(t0.Add(48 * time.Second))); len(got) != 2 || got[1] != "db-1 NodeReachable" && got[0] != "db-1 NodeReachable" {
		t.Fatalf("db-1 heard again: %v", got)
	}
}

// Every event type that moves grants (events.MovesGrants) names whom it
// cuts, and nothing else does: a grant-moving type left out here would leave
// a connection holding what the log took away. Fails when the two differ.
func TestEveryGrantEventCuts(t *testing.T) {
	moving := events.TypesMoving(events.MovesGrants)
	if len(moving) != len(grantUsers) || len(grantEvents) != len(moving) {
		t.Fatalf("%d types move grants, %d name whom they cut, %d subjects are followed", len(moving), len(grantUsers), len(grantEvents))
	}
	for _, typ := range moving {
		if _, ok := grantUsers[typ]; !ok {
			t.Errorf("%s moves grants and cuts nobody: add it to grantUsers", typ)
		}
	}
}

// The rollout's gate (aggregates.Gate) reads the runtime states the fold
// writes: were they to differ, every program would read as not running and
// a crash loop would never halt a wave.
func TestTheGateReadsTheFoldsRuntimeStates(t *testing.T) {
	if aggregates.RuntimeRunning != projections.RuntimeRunning || aggregates.RuntimeCrashLooping != projections.RuntimeCrashLooping {
		t.Fatal("aggregates and projections name the runtime states differently")
	}
}

// Time travel answers as the same controller: every field of Self (its
// bus, name, keys, secrets) is the present's in the past's handlers. Fails
// when the past's handlers are built field by field and one is missed.
func TestThePastIsTheSameController(t *testing.T) {
	srv := embeddedtest.Server(t)
	ctrl, err := StartController(context.Background(), embeddedtest.Conn(t, srv), ControllerConfig{Home: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ctrl.Close() })
	h := ctrl.Handlers
	if err := h.inThePast(context.Background(), time.Now(), func(past *Handlers) error {
		if past.Self != h.Self || !past.Past || past.Proj == h.Proj {
			t.Fatalf("the past's handlers: %+v", past.Self)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}
