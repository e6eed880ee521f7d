package status_test

import (
	"sync"
	"testing"
	"time"

	"github.com/meshctl/mesh/agent/agenttest"
	"github.com/meshctl/mesh/commands"
	"github.com/meshctl/mesh/wire"
)

// clock is the controller's, moved by the test: every event's moment is
// one the test chose, so a since is compared exactly, never timed.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time           { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) set(t time.Time)          { c.mu.Lock(); defer c.mu.Unlock(); c.now = t }
func hours(t0 time.Time, h int) time.Time { return t0.Add(time.Duration(h) * time.Hour) }

// "cannot be composed since" is the moment it could no longer be (issue 31,
// point 10): the unassign that took its provider away, not its enrolment,
// not the moment status was asked; a later change that leaves it so does
// not move it; once it composes again and breaks again, the new moment.
func TestCannotBeComposedSinceItsCauseNotItsEnrolment(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	c := &clock{now: t0}
	m := agenttest.NewWith(t, func(cfg *commands.ControllerConfig) { cfg.Now = c.Now })
	// Events are stamped by the log's clock: the same one, before the
	// test appends any (as TestStatusAsOf moves it).
	m.H.Core.Store.Now = c.Now
	for _, n := range []string{"p", "c", "x"} {
		m.Enroll(n)
	}
	m.WriteModule(`{"module":"q","provides":["queue"]}`)
	m.WriteModule(`{"module":"w","consumes":["queue"]}`)
	m.WriteModule(`{"module":"o"}`)
	m.Assign("p", "q", nil)
	m.Assign("c", "w", nil)
	if s := m.Status()["c"]; s.State == wire.StateCannotCompose {
		t.Fatalf("c composes while q is on p: %+v", s)
	}
	since := func(want time.Time, why string) {
		t.Helper()
		s := m.Status()["c"]
		if s.State != wire.StateCannotCompose || !s.Since.Equal(want) {
			t.Fatalf("%s: c is %s since %s (%s), want cannot be composed since %s", why, s.State, s.Since, s.Detail, want)
		}
	}
	// q back on p, at the clock's moment: c composes, as a status says.
	reassign := func() {
		t.Helper()
		m.Assign("p", "q", nil)
		if s := m.Status()["c"]; s.State == wire.StateCannotCompose {
			t.Fatalf("c still cannot be composed with q back on p at %s: %+v", c.Now(), s)
		}
	}
	unassign := func() {
		t.Helper()
		if _, err := m.H.Nodes.Unassign(m.Ctx, wire.UnassignRequest{CommandID: wire.NewCommandID(), Node: "p", Module: "q"}); err != nil {
			t.Fatal(err)
		}
	}

	c.set(hours(t0, 1))
	unassign()
	c.set(hours(t0, 2))
	since(hours(t0, 1), "the provider unassigned at +1h, status asked at +2h")

	c.set(hours(t0, 3))
	m.Assign("x", "o", nil) // moves composition, leaves c as it was
	since(hours(t0, 1), "a change elsewhere at +3h")

	// c's own labels: c is composed again (a patch of the last
	// composition, c among the nodes it moved) and still cannot be, since
	// its cause, not since the change that moved it.
	c.set(hours(t0, 3).Add(20 * time.Minute))
	if _, err := m.H.Nodes.ChangeNode(m.Ctx, wire.ChangeNodeRequest{CommandID: wire.NewCommandID(), Name: "c", Capabilities: []string{}, Labels: map[string]string{"tier": "b"}}); err != nil {
		t.Fatal(err)
	}
	since(hours(t0, 1), "c's own labels changed at +3h20m")
	// An artifact recorded moves every node's composition: all of them
	// composed again from a fresh read, and c's since kept all the same.
	c.set(hours(t0, 3).Add(40 * time.Minute))
	m.PutArtifact("blob", []byte("a blob"))
	since(hours(t0, 1), "an artifact recorded at +3h40m")

	c.set(hours(t0, 4))
	reassign()
	c.set(hours(t0, 5))
	unassign()
	since(hours(t0, 5), "unassigned again at +5h")

	// A push before any status composes c and caches what it composed
	// (Keep): the status after reads that, and still says since when.
	c.set(hours(t0, 6))
	reassign()
	c.set(hours(t0, 7))
	unassign()
	c.set(hours(t0, 8))
	m.Push("")
	since(hours(t0, 7), "unassigned at +7h, pushed at +8h before any status")
}
