package reconcile_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshctl/mesh/agent"
	"github.com/meshctl/mesh/agent/agenttest"
	"github.com/meshctl/mesh/commands"
	"github.com/meshctl/mesh/commands/reconcile"
	"github.com/meshctl/mesh/embedded/embeddedtest"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/wire"
)

// motd is a module of one file its setting prints; mode is its reconcile
// ("" says none).
func motd(name, mode string) string {
	r := ""
	if mode != "" {
		r = fmt.Sprintf(`"reconcile":%q,`, mode)
	}
	return fmt.Sprintf(`{"module":%q,%s"settings":{"text":{"default":"hi"}},"resources":[{"kind":"file","path":"/etc/%s","mode":"0644","template":"{{.Settings.text}}\n"}]}`, name, r, name)
}

// reconciling is a mesh whose controller reconciles at rate a window; a
// negative every has it tick only when the test says (Tick), so what a
// window sends is counted, not timed.
func reconciling(t *testing.T, rate int, every time.Duration) *agenttest.Mesh {
	return agenttest.NewWith(t, func(c *commands.ControllerConfig) {
		c.Reconcile = reconcile.Config{Rate: rate, Every: every}
		c.RolloutEvery = -1 // a rollout stays where the test put it
	})
}

// tick is one window of the reconciler.
func tick(m *agenttest.Mesh) {
	m.T.Helper()
	m.Must(m.H.Reconcile.Tick(m.Ctx))
}

// sentBy is who sent node its last declaration ("" never sent).
func sentBy(m *agenttest.Mesh, node string) string {
	m.T.Helper()
	n, _, err := m.H.Core.Proj.Node(node)
	m.Must(err)
	if n.LastSent == nil {
		return ""
	}
	return n.LastSent.By
}

// declarations are node's declarations in its history, by whom each was sent.
func declarations(m *agenttest.Mesh, node string) []string {
	m.T.Helper()
	h, err := m.H.History.History(m.Ctx, wire.HistoryRequest{Node: node})
	m.Must(err)
	var by []string
	for _, e := range h.Entries {
		if e.Kind == "declaration" {
			by = append(by, e.By)
		}
	}
	return by
}

func fileIs(m *agenttest.Mesh, path, want string) {
	m.T.Helper()
	embeddedtest.Eventually(m.T, path+" to hold "+want, func() bool {
		b, _ := os.ReadFile(path)
		return string(b) == want
	})
}

// A module's change reaches the running agents with no mesh push, and
// history, the node's row and status say the reconciler sent it.
func TestAChangeReachesRunningAgentsWithoutAPush(t *testing.T) {
	m := reconciling(t, 10, 20*time.Millisecond)
	m.Enroll("web-1", "linux")
	m.Enroll("web-2", "linux")
	root1, _ := m.Agent("web-1")
	root2, _ := m.Agent("web-2")
	m.WriteModule(motd("motd", ""))
	m.Assign("web-1", "motd", nil)
	m.Assign("web-2", "motd", nil)
	fileIs(m, filepath.Join(root1, "etc/motd"), "hi\n")
	fileIs(m, filepath.Join(root2, "etc/motd"), "hi\n")
	m.Assign("web-1", "motd", map[string]string{"text": "hello"})
	fileIs(m, filepath.Join(root1, "etc/motd"), "hello\n")
	m.WaitState("web-1", wire.StateCurrent)
	if by := declarations(m, "web-1"); len(by) < 2 || by[len(by)-1] != events.ByReconciler {
		t.Fatalf("web-1's history names its senders %v; want the reconciler last", by)
	}
	if n := m.Status()["web-1"]; n.By != events.ByReconciler {
		t.Fatalf("status says web-1 was last sent by %q", n.By)
	}
	s, err := m.H.Status.Status(m.Ctx, wire.StatusRequest{})
	m.Must(err)
	if s.Reconciler == nil || s.Reconciler.Sent < 3 || s.Reconciler.AtMost != 10 {
		t.Fatalf("status says of the reconciler %+v; want it on, rate 10, 3 or more sent", s.Reconciler)
	}
}

// A bound of one a window sends one node a window, however many are
// behind; the rest wait their turn in status's queue.
func TestTheRateBoundHolds(t *testing.T) {
	m := reconciling(t, 1, -1)
	m.WriteModule(motd("motd", ""))
	for _, n := range []string{"a", "b", "c"} {
		m.Enroll(n, "linux")
		m.Assign(n, "motd", nil)
	}
	for window := 1; window <= 4; window++ {
		tick(m)
		sent := 0
		for _, n := range []string{"a", "b", "c"} {
			if sentBy(m, n) == events.ByReconciler {
				sent++
			}
		}
		if want := min(window, 3); sent != want {
			t.Fatalf("after %d window(s) of one, %d node(s) were sent; want %d", window, sent, want)
		}
		s, err := m.H.Status.Status(m.Ctx, wire.StatusRequest{})
		m.Must(err)
		if want := max(0, 3-window); s.Reconciler.Queued != want {
			t.Fatalf("after %d window(s), status says %d queued; want %d", window, s.Reconciler.Queued, want)
		}
	}
	if got := m.H.Reconcile.Sent(); got != 3 {
		t.Fatalf("the reconciler counts %d sent; want 3", got)
	}
}

// A node held by a hand declaration, one inside a rollout and one of a
// module whose reconcile is never are left to people, and status says
// why; a node beside them is sent.
func TestHeldRolledAndNeverAreLeftAlone(t *testing.T) {
	m := reconciling(t, 10, -1)
	for _, n := range []string{"hand", "rolled", "manual", "free"} {
		m.Enroll(n, "linux")
	}
	m.WriteModule(motd("motd", ""))
	m.WriteModule(motd("still", "never"))
	m.WriteModule(motd("extra", ""))
	for _, n := range []string{"hand", "rolled", "free"} {
		m.Assign(n, "motd", nil)
		m.Push(n)
	}
	m.Assign("manual", "still", nil)
	m.Push("manual")
	_, err := m.H.Push.Declare(m.Ctx, wire.DeclareRequest{CommandID: wire.NewCommandID(), Node: "hand", File: "h.json",
		Body: `{"resources":[{"kind":"file","path":"/etc/motd","mode":"0644","content":"by hand\n"}]}`})
	m.Must(err)
	// A new build of motd, rolled out to rolled alone; the rollout is
	// never driven here, so it stays open with rolled in its wave.
	m.WriteModule(strings.Replace(motd("motd", ""), `"hi"`, `"hey"`, 1))
	_, err = m.H.Rollouts.StartRollout(m.Ctx, wire.RolloutRequest{CommandID: wire.NewCommandID(), Module: "motd",
		Waves: []wire.WaveSpec{{Name: "one", Selector: "name=rolled"}}})
	m.Must(err)
	// Every one of them is now behind what it would be sent.
	for _, n := range []string{"hand", "rolled", "free"} {
		m.Assign(n, "extra", nil)
	}
	m.Assign("manual", "still", map[string]string{"text": "changed"})
	for range 3 {
		tick(m)
	}
	want := map[string]string{"hand": events.ByHand, "rolled": "push", "manual": "push", "free": events.ByReconciler}
	for n, by := range want {
		if got := sentBy(m, n); got != by {
			t.Errorf("%s was last sent by %q; want %q", n, got, by)
		}
	}
	s, err := m.H.Status.Status(m.Ctx, wire.StatusRequest{})
	m.Must(err)
	left := map[string]string{}
	for _, l := range s.Reconciler.Left {
		left[l.Node] = l.Reason
	}
	for n, why := range map[string]string{"hand": "hand declaration", "rolled": "in rollout", "manual": "module still says reconcile never"} {
		if !strings.Contains(left[n], why) {
			t.Errorf("status says the reconciler left %s because %q; want it to say %q", n, left[n], why)
		}
	}
	if s.Reconciler.LeftCount != 3 {
		t.Errorf("status counts %d node(s) left; want 3: %+v", s.Reconciler.LeftCount, s.Reconciler.Left)
	}
}

// A node that refuses what the reconciler sends it is not sent the same
// again, window after window; a change of what it would be sent is.
func TestARefusingNodeIsNotSentInALoop(t *testing.T) {
	m := reconciling(t, 10, -1)
	m.Enroll("ahead", "linux")
	// The node applied sequences the log does not hold: it refuses a replay.
	root := filepath.Join(t.TempDir(), "root")
	m.Must(os.MkdirAll(root+".state", 0o700))
	m.Must(os.WriteFile(filepath.Join(root+".state", "state.json"), []byte(`{"node":"ahead","last_sequence":100}`), 0o600))
	m.AgentAt("ahead", root)
	m.WriteModule(motd("motd", ""))
	m.Assign("ahead", "motd", nil)
	tick(m)
	m.WaitState("ahead", wire.StateRefused)
	for range 5 {
		tick(m)
	}
	if by := declarations(m, "ahead"); len(by) != 1 {
		t.Fatalf("ahead was sent %d declarations (%v) after refusing the first; want it sent once", len(by), by)
	}
	s, err := m.H.Status.Status(m.Ctx, wire.StatusRequest{})
	m.Must(err)
	if len(s.Reconciler.Left) != 1 || !strings.Contains(s.Reconciler.Left[0].Reason, "refused what it would be sent") {
		t.Fatalf("status says the reconciler left %+v; want ahead, refused", s.Reconciler.Left)
	}
	// What it would be sent changes: sent once more, numbered above
	// what it applied, and applied.
	m.Assign("ahead", "motd", map[string]string{"text": "again"})
	tick(m)
	m.WaitState("ahead", wire.StateCurrent)
	fileIs(m, filepath.Join(root, "etc/motd"), "again\n")
	if by := declarations(m, "ahead"); len(by) != 2 {
		t.Fatalf("ahead was sent %v; want two declarations", by)
	}
}

// Under always, a drift its agent left as found is put back by sending
// the node its declaration again; under behind it is left, and said.
func TestAlwaysSendsADriftedNodeAgain(t *testing.T) {
	m := reconciling(t, 10, -1)
	m.Enroll("web-1", "linux")
	m.Enroll("web-2", "linux")
	drifting := func(c *agent.Config) { c.DriftReport, c.DriftEvery = true, 20*time.Millisecond }
	root1 := filepath.Join(t.TempDir(), "root")
	m.AgentWith("web-1", root1, drifting)
	root2 := filepath.Join(t.TempDir(), "root")
	m.AgentWith("web-2", root2, drifting)
	m.WriteModule(motd("always", "always"))
	m.WriteModule(motd("behind", "behind"))
	m.Assign("web-1", "always", nil)
	m.Assign("web-2", "behind", nil)
	tick(m)
	m.WaitState("web-1", wire.StateCurrent)
	m.WaitState("web-2", wire.StateCurrent)
	m.Must(os.WriteFile(filepath.Join(root1, "etc/always"), []byte("edited\n"), 0o644))
	m.Must(os.WriteFile(filepath.Join(root2, "etc/behind"), []byte("edited\n"), 0o644))
	m.WaitState("web-1", wire.StateDrifted)
	m.WaitState("web-2", wire.StateDrifted)
	tick(m)
	fileIs(m, filepath.Join(root1, "etc/always"), "hi\n")
	m.WaitState("web-1", wire.StateCurrent)
	if by := declarations(m, "web-1"); len(by) != 2 || by[1] != events.ByReconciler {
		t.Fatalf("web-1 was sent %v; want a second declaration by the reconciler", by)
	}
	if by := declarations(m, "web-2"); len(by) != 1 {
		t.Fatalf("web-2 (reconcile behind) was sent %v after drifting; want nothing more", by)
	}
	if b, _ := os.ReadFile(filepath.Join(root2, "etc/behind")); string(b) != "edited\n" {
		t.Fatalf("web-2's drift was put back (%q); behind leaves it", b)
	}
}
