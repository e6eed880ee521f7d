package liveness_test

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshctl/mesh/agent"
	"github.com/meshctl/mesh/agent/agenttest"
	"github.com/meshctl/mesh/commands"
	"github.com/meshctl/mesh/commands/liveness"
	"github.com/meshctl/mesh/declaration"
	"github.com/meshctl/mesh/embedded/embeddedtest"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/events/store"
	"github.com/meshctl/mesh/wire"
)

// clock is the controller's clock in a liveness test: real time plus an
// offset the test moves, so a bound is passed without waiting it out.
type clock struct{ ahead atomic.Int64 }

func (c *clock) Now() time.Time          { return time.Now().Add(time.Duration(c.ahead.Load())) }
func (c *clock) Advance(d time.Duration) { c.ahead.Add(int64(d)) }
func beatFast(cfg *agent.Config)         { cfg.LiveEvery = 20 * time.Millisecond }

// pass moves the clock on by d a second at a time, each step waiting until
// every node of beating was heard after it: a live agent's beat lands
// between the controller's checks, as it does in real time.
func (c *clock) pass(t *testing.T, m *agenttest.Mesh, d time.Duration, beating ...string) {
	t.Helper()
	for moved := time.Duration(0); moved < d; moved += time.Second {
		c.Advance(time.Second)
		at := c.Now()
		for _, n := range beating {
			embeddedtest.Eventually(t, n+" to be heard on the moved clock", func() bool { return !m.H.Live.LastHeard(n).Before(at) })
		}
	}
}

// livenessEvents are the liveness changes the log holds of node, in order.
func livenessEvents(t *testing.T, m *agenttest.Mesh, node string) []string {
	t.Helper()
	st, err := store.Attach(m.Ctx, embeddedtest.Conn(t, m.Srv), "")
	m.Must(err)
	recs, _, err := st.Load(m.Ctx, events.LivenessAggregate(node))
	m.Must(err)
	var out []string
	for _, r := range recs {
		out = append(out, r.Event.EventType())
	}
	return out
}

// Issue 28: an agent that stops is unreachable once silent past the bound,
// status is not well and names it, and only the changes are recorded;
// heard again, it is current. A node that never said anything, and one
// that keeps beating, are never called lost.
func TestASilentAgentIsUnreachableAndComesBack(t *testing.T) {
	t.Parallel() // its own bus and homes; long and partly waiting: beside the others
	var c clock
	m := agenttest.NewWith(t, func(cfg *commands.ControllerConfig) { cfg.Now = c.Now })
	for _, n := range []string{"web-1", "web-2", "web-3"} {
		m.Enroll(n)
	}
	root1 := t.TempDir() + "/root"
	stop1 := m.AgentWith("web-1", root1, beatFast)
	stop2 := m.AgentWith("web-2", t.TempDir()+"/root", beatFast)
	defer stop2()
	m.Push("")
	m.WaitState("web-1", wire.StateCurrent)
	m.WaitState("web-2", wire.StateCurrent)
	embeddedtest.Eventually(t, "the controller to hear web-1", func() bool { return !m.H.Live.LastHeard("web-1").IsZero() })

	// web-1's agent stops; the clock runs on past the bound.
	stop1()
	c.pass(t, m, liveness.DefaultUnreachableAfter+2*time.Second, "web-2")
	n := m.WaitState("web-1", wire.StateUnreachable)
	if !strings.Contains(n.Detail, "its last state: current") {
		t.Fatalf("web-1's detail says not what it was last: %q", n.Detail)
	}
	s, err := m.H.Status.Status(m.Ctx, wire.StatusRequest{})
	m.Must(err)
	if s.Well {
		t.Fatal("status is well with web-1 unreachable")
	}
	if s.UnreachableAfter != liveness.DefaultUnreachableAfter.Seconds() {
		t.Fatalf("status says the bound is %vs, not %v", s.UnreachableAfter, liveness.DefaultUnreachableAfter)
	}
	// node show and node list say so too.
	show, err := m.H.Status.ShowNode(m.Ctx, wire.NameRequest{Name: "web-1"})
	m.Must(err)
	if show.State != wire.StateUnreachable || show.UnreachableSince == nil || show.LastHeard == nil {
		t.Fatalf("node show: state %s, unreachable since %v, last heard %v", show.State, show.UnreachableSince, show.LastHeard)
	}
	list, err := m.H.Nodes.ListNodes(m.Ctx, wire.ListRequest{Brief: true})
	m.Must(err)
	for _, nv := range list.Nodes {
		if (nv.UnreachableSince != nil) != (nv.Name == "web-1") {
			t.Fatalf("node list: %s unreachable since %v", nv.Name, nv.UnreachableSince)
		}
	}

	// Back: the same root and state, beating again.
	m.AgentWith("web-1", root1, beatFast)
	m.WaitState("web-1", wire.StateCurrent)
	if got := strings.Join(livenessEvents(t, m, "web-1"), ","); got != "NodeUnreachable,NodeReachable" {
		t.Fatalf("web-1's liveness in the log: %s, want one loss and one return", got)
	}
	// history says when it went dark, among what it was told and said.
	hist, err := m.H.History.History(m.Ctx, wire.HistoryRequest{Node: "web-1"})
	m.Must(err)
	var kinds []string
	for _, e := range hist.Entries {
		kinds = append(kinds, e.Kind)
	}
	if got := strings.Join(kinds, ","); !strings.HasSuffix(got, "applied,unreachable,reachable") {
		t.Fatalf("web-1's history: %s", got)
	}
	// web-2 beat throughout; web-3 never said anything: neither was lost.
	for _, n := range []string{"web-2", "web-3"} {
		if got := livenessEvents(t, m, n); len(got) != 0 {
			t.Fatalf("%s's liveness in the log: %v, want nothing", n, got)
		}
		if st := m.Status()[n].State; st == wire.StateUnreachable {
			t.Fatalf("%s is %s", n, st)
		}
	}
}

// A node silent through a controller's restart is lost all the same: the
// new controller knows from the log that it once spoke (its report key),
// and gives it the bound from its own start to be heard. A retired node is
// never lost.
func TestANodeSilentAcrossARestartIsUnreachable(t *testing.T) {
	t.Parallel() // its own bus and clock; mostly waiting: beside the others
	var c clock
	m := agenttest.NewWith(t, func(cfg *commands.ControllerConfig) { cfg.Now = c.Now })
	m.Enroll("db-1")
	m.Enroll("gone")
	stopDB := m.AgentWith("db-1", t.TempDir()+"/root", beatFast)
	stopGone := m.AgentWith("gone", t.TempDir()+"/root", beatFast)
	m.Push("")
	m.WaitState("db-1", wire.StateCurrent)
	m.WaitState("gone", wire.StateCurrent)
	stopDB()
	stopGone()
	_, err := m.H.Nodes.Retire(m.Ctx, wire.RetireRequest{CommandID: wire.NewCommandID(), Name: "gone"})
	m.Must(err)
	m.Ctrl.Close()

	ctrl, err := commands.StartController(context.Background(), embeddedtest.Conn(t, m.Srv), commands.ControllerConfig{Home: m.Home, Now: c.Now})
	m.Must(err)
	defer ctrl.Close()
	m.H = ctrl
	c.Advance(liveness.DefaultUnreachableAfter + time.Second)
	m.WaitState("db-1", wire.StateUnreachable)
	if got := livenessEvents(t, m, "gone"); len(got) != 0 {
		t.Fatalf("a retired node's liveness in the log: %v", got)
	}
}

// Nodes lost together (a rack, a network) are named in the log up to a
// few a check, the rest counted in one line: a line each buried all else
// the controller said. Status names every one. Fails when a node past
// the few gets a line of its own, or when the count is missing or wrong.
// The controller is started again once the agents stopped, as when a
// rack is lost across a restart: the new one heard none of their last
// beats, so one step of its clock past the bound loses all three in one
// check (a beat still in flight as the old one's clock moved was heard
// after the move, and lost its node a check later).
func TestManyNodesLostAtOnceAreCountedInTheLog(t *testing.T) {
	t.Parallel() // its own bus and clock; mostly waiting: beside the others
	// Put back after the controllers stop: cleanups run last first.
	t.Cleanup(liveness.SetLogEach(1))
	var c clock
	m := agenttest.NewWith(t, func(cfg *commands.ControllerConfig) { cfg.Now = c.Now })
	nodes := []string{"rack-1", "rack-2", "rack-3"}
	var stops []func()
	for _, n := range nodes {
		m.Enroll(n)
		stops = append(stops, m.AgentWith(n, t.TempDir()+"/root", beatFast))
	}
	m.Push("")
	for _, n := range nodes {
		m.WaitState(n, wire.StateCurrent)
	}
	for _, stop := range stops {
		stop()
	}
	m.Ctrl.Close()

	var log embeddedtest.LockedBuffer
	ctrl, err := commands.StartController(context.Background(), embeddedtest.Conn(t, m.Srv),
		commands.ControllerConfig{Home: m.Home, Now: c.Now, Log: slog.New(slog.NewTextHandler(&log, nil))})
	m.Must(err)
	t.Cleanup(func() { ctrl.Close() })
	m.H = ctrl
	c.Advance(liveness.DefaultUnreachableAfter + 2*time.Second)
	for _, n := range nodes {
		m.WaitState(n, wire.StateUnreachable)
	}
	embeddedtest.Eventually(t, "the count of the rest in the log", func() bool { return strings.Contains(log.String(), "more nodes unreachable") })
	text := log.String()
	if named := strings.Count(text, `msg="node unreachable"`); named != 1 {
		t.Fatalf("%d nodes named unreachable in the log, want 1 (the rest counted):\n%s", named, text)
	}
	if !strings.Contains(text, "more=2 unreachable_now=3") {
		t.Fatalf("the log does not count the 2 nodes past the one named:\n%s", text)
	}
}

// A node's beat holds under either of its keys, its own beat key or (a node
// enrolled before nodes made their own keys) its derived report MAC key,
// and a node beating under one after the other is heard at each; a beat
// under another node's key is not the node heard. The controller tries the
// key that held last first, which must change nothing of this. Fails when
// either key stops being heard, or a stranger's key is.
func TestABeatUnderEitherOfItsNodesKeysIsHeardAndNoOther(t *testing.T) {
	t.Parallel() // its own bus and clock
	var c clock
	m := agenttest.NewWith(t, func(cfg *commands.ControllerConfig) { cfg.Now = c.Now })
	m.Enroll("web-1")
	m.Enroll("web-2")
	nc := embeddedtest.Conn(t, m.Srv)
	keys := m.H.Live.Keys
	said := time.Now()
	// beat publishes node's beat under key, said a millisecond after the
	// last, then web-2's under its own key, so that once web-2 is heard at
	// the clock's moment the beat before it on this connection was read.
	beat := func(node string, key []byte) {
		t.Helper()
		c.Advance(time.Second)
		at := c.Now()
		for _, b := range []struct {
			node string
			key  []byte
		}{{node, key}, {"web-2", keys.NodeBeat("web-2")}} {
			said = said.Add(time.Millisecond)
			subject := events.LivenessPrefix + "." + b.node
			m.Must(nc.Publish(subject, declaration.Beat(b.key, subject, said)))
		}
		m.Must(nc.Flush())
		embeddedtest.Eventually(t, "web-2 heard after "+node, func() bool { return !m.H.Live.LastHeard("web-2").Before(at) })
	}
	heardAt := func() time.Time { return m.H.Live.LastHeard("web-1") }
	for i, key := range [][]byte{keys.NodeMAC("web-1"), keys.NodeBeat("web-1"), keys.NodeBeat("web-1"), keys.NodeMAC("web-1"), keys.NodeMAC("web-1")} {
		before := heardAt()
		beat("web-1", key)
		if !heardAt().After(before) {
			t.Fatalf("beat %d of web-1, under one of its own keys, not heard", i+1)
		}
	}
	for name, key := range map[string][]byte{"web-2's beat key": keys.NodeBeat("web-2"), "web-2's report MAC key": keys.NodeMAC("web-2"), "the controller's log MAC key": keys.LogMAC()} {
		before := heardAt()
		beat("web-1", key)
		if !heardAt().Equal(before) {
			t.Errorf("a beat of web-1 under %s was heard", name)
		}
	}
}
