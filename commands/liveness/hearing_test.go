package liveness

import (
	"testing"
	"time"

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
	l := &hearing{bound: 20 * time.Second, nc: nc, heard: map[string]beat{"web-1": {at: t0}},
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
