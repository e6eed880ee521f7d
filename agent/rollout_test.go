package agent_test

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshctl/mesh/commands"
	"github.com/meshctl/mesh/embedded/embeddedtest"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/events/store"
	"github.com/meshctl/mesh/projections"
	"github.com/meshctl/mesh/wire"
)

// controller starts another controller on the mesh's stream, with its
// key, driving rollouts every interval (negative: only when called).
func (m *mesh) controller(every time.Duration) *commands.Controller {
	m.T.Helper()
	home := m.T.TempDir()
	key, err := os.ReadFile(filepath.Join(m.Home, commands.KeyFile))
	m.Must(err)
	m.Must(os.WriteFile(filepath.Join(home, commands.KeyFile), key, 0o600))
	c, err := commands.StartController(m.Ctx, embeddedtest.Conn(m.T, m.Srv), commands.ControllerConfig{Home: home, RolloutEvery: every})
	m.Must(err)
	m.T.Cleanup(func() { c.Close() })
	return c
}

// newBuildFor enrolls nodes (each with an agent when agent says so),
// gives them motd "one", pushes, and registers motd "two": a build for a
// rollout to take them to.
func (m *mesh) newBuildFor(nodes []string, agent func(string) bool) {
	m.T.Helper()
	for _, n := range nodes {
		m.Enroll(n)
		if agent(n) {
			m.Agent(n)
		}
	}
	m.WriteModule(`{"module":"motd","resources":[{"kind":"file","path":"/etc/motd","mode":"0644","content":"one\n"}]}`)
	for _, n := range nodes {
		m.Assign(n, "motd", nil)
	}
	m.Push("")
	m.WriteModule(`{"module":"motd","resources":[{"kind":"file","path":"/etc/motd","mode":"0644","content":"two\n"}]}`)
}

// rolloutState drives the rollouts once more and answers id's state.
func (m *mesh) rolloutState(id string) projections.Rollout {
	m.T.Helper()
	m.Must(m.H.Rollouts.DriveRollouts(m.Ctx))
	list, err := m.H.Rollouts.ListRollouts(m.Ctx, wire.Empty{})
	m.Must(err)
	for _, r := range list.Rollouts {
		if r.ID == id {
			return r
		}
	}
	m.T.Fatalf("no rollout %s", id)
	return projections.Rollout{}
}

// steps counts the rollout's steps of each kind in the log, by wave.
func (m *mesh) steps(id string) map[string]int {
	m.T.Helper()
	out := map[string]int{}
	m.Must(m.H.Core.Store.Read(m.Ctx, store.ReadOptions{Filter: events.RolloutAggregate(id).Filter()}, func(msg store.Msg) error {
		if _, ev, err := events.Decode(msg.Data); err == nil {
			if s, ok := ev.(events.RolloutStep); ok {
				out[fmt.Sprintf("%s %d", s.Step, s.Wave)]++
			}
		}
		return nil
	}))
	return out
}

// Rollouts with real agents (issue 17): three waves (a canary, then half
// the nodes, then everything else) move only once the wave before applied
// the new build; a canary whose apply fails halts the rollout with the
// node named, the later waves untouched, and --auto-revert sends it back;
// pause holds a rollout where it is and resume moves it on. Fails when a
// wave starts before the one before applied, or a step is taken twice.
func TestRolloutsMoveWaveByWave(t *testing.T) {
	t.Parallel()
	m := newMesh(t)
	// A second controller on the same stream, with the same key, drives
	// the same rollouts, often: each step still lands once.
	m.controller(20 * time.Millisecond)
	roots := map[string]string{}
	for i, n := range []string{"w-1", "w-2", "w-3", "w-4"} {
		zone := "eu-1"
		if i == 3 {
			zone = "eu-2"
		}
		_, err := m.H.Nodes.Enroll(m.Ctx, wire.EnrollRequest{CommandID: wire.NewCommandID(), Name: n, Labels: map[string]string{"zone": zone}})
		m.Must(err)
		roots[n] = filepath.Join(t.TempDir(), "root")
		m.AgentAt(n, roots[n])
	}
	motd := func(content string, extra string) {
		m.WriteModule(`{"module":"motd","resources":[{"kind":"directory","path":"/etc","mode":"0755"},{"kind":"file","path":"/etc/motd","mode":"0644","content":"` + content + `\n"}` + extra + `]}`)
	}
	motd("one", "")
	for n := range roots {
		m.Assign(n, "motd", nil)
	}
	for _, s := range m.Push("").Sent {
		m.Report(s.Node, s.Digest)
	}
	waves := []wire.WaveSpec{{Name: "canary", Selector: "name=w-1"}, {Name: "half", Selector: "50%"}, {Name: "rest", Selector: "*"}}
	start := func(autoRevert bool) projections.Rollout {
		t.Helper()
		r, err := m.H.Rollouts.StartRollout(m.Ctx, wire.RolloutRequest{CommandID: wire.NewCommandID(), Module: "motd", Waves: waves, AutoRevert: autoRevert})
		m.Must(err)
		return r
	}
	read := func(n string) string {
		b, _ := os.ReadFile(filepath.Join(roots[n], "etc/motd"))
		return string(b)
	}

	// Three waves, each after the one before applied.
	motd("two", "")
	r := start(false)
	if w := r.Waves; len(w) != 3 || len(w[0].Nodes) != 1 || len(w[1].Nodes) != 2 || w[2].Nodes[0] != "w-4" {
		t.Fatalf("the waves chosen: %+v", w)
	}
	during := time.Now()
	eventually(t, "the rollout to finish", func() bool { return m.rolloutState(r.ID).State == projections.RolloutFinished })
	// status --as-of sees the rollout as it was, open.
	then, err := m.H.Status.Status(m.Ctx, wire.StatusRequest{AsOf: during})
	m.Must(err)
	if len(then.Rollouts) != 1 || then.Rollouts[0].ID != r.ID || !then.Rollouts[0].Open() {
		t.Fatalf("status as of the rollout's start: %+v", then.Rollouts)
	}
	// history names the rollout that sent each declaration.
	h, err := m.H.History.History(m.Ctx, wire.HistoryRequest{Node: "w-4"})
	m.Must(err)
	if last := h.Entries[len(h.Entries)-1]; last.Kind != "applied" || h.Entries[len(h.Entries)-2].By != "rollout "+r.ID {
		t.Fatalf("w-4's history ends %+v, %+v", h.Entries[len(h.Entries)-2], last)
	}
	for n := range roots {
		if got := read(n); got != "two\n" {
			t.Fatalf("%s holds %q after the rollout", n, got)
		}
	}
	applied := func(node string) uint64 { // stream seq of node's report applying its newest
		h, err := m.H.History.History(m.Ctx, wire.HistoryRequest{Node: node})
		m.Must(err)
		var seq uint64
		for _, e := range h.Entries {
			if e.Kind == "applied" {
				seq = e.Seq
			}
		}
		return seq
	}
	sent := func(node string) uint64 { // stream seq of node's newest declaration
		row, _, err := m.H.Core.Proj.Node(node)
		m.Must(err)
		return row.LastSent.StreamSeq
	}
	if !(sent("w-2") > applied("w-1") && sent("w-3") > applied("w-1") && sent("w-4") > applied("w-2") && sent("w-4") > applied("w-3")) {
		t.Fatal("a wave was sent before the wave before it applied")
	}
	if s := m.steps(r.ID); s["wave started 0"] != 1 || s["wave started 1"] != 1 || s["wave started 2"] != 1 || s["finished 2"] != 1 {
		t.Fatalf("steps of the rollout: %v (each once)", s)
	}

	// A canary that cannot apply: halted, named, the rest untouched, reverted.
	m.Must(os.Symlink(t.TempDir(), filepath.Join(roots["w-1"], "etc/link")))
	motd("three", `,{"kind":"file","path":"/etc/link/x","mode":"0644","content":"x"}`)
	r = start(true)
	eventually(t, "the rollout to halt and revert", func() bool { ro := m.rolloutState(r.ID); return ro.State == projections.RolloutHalted && ro.Reverted })
	ro := m.rolloutState(r.ID)
	if ro.Node != "w-1" || !strings.Contains(ro.Why, "/etc/link/x") {
		t.Fatalf("the halt: %+v", ro)
	}
	for _, n := range []string{"w-2", "w-3", "w-4"} {
		if got := read(n); got != "two\n" {
			t.Fatalf("%s of a later wave holds %q after the canary halted", n, got)
		}
	}
	eventually(t, "the canary back on the build it had", func() bool {
		row, _, _ := m.H.Core.Proj.Node("w-1")
		return row.LastReport != nil && row.LastReport.Outcome == "applied" && row.LastReport.Digest == row.LastSent.Digest && read("w-1") == "two\n"
	})

	// Halted, it keeps the mesh not well until the operator aborts it.
	if s, _ := m.H.Status.Status(m.Ctx, wire.StatusRequest{}); s.Well || !strings.Contains(strings.Join(s.Causes, "\n"), "mesh rollout abort "+r.ID) {
		t.Fatalf("status with a halted rollout: %+v", s.Causes)
	}
	_, err = m.H.Rollouts.ControlRollout(m.Ctx, wire.RolloutControl{CommandID: wire.NewCommandID(), ID: r.ID, Step: events.StepAborted})
	m.Must(err)
	if s, _ := m.H.Status.Status(m.Ctx, wire.StatusRequest{}); strings.Contains(strings.Join(s.Causes, "\n"), r.ID) {
		t.Fatalf("an aborted rollout still a cause: %+v", s.Causes)
	}

	// Pause holds it; resume moves it on.
	m.Must(os.Remove(filepath.Join(roots["w-1"], "etc/link")))
	motd("four", "")
	r = start(false)
	paused, err := m.H.Rollouts.ControlRollout(m.Ctx, wire.RolloutControl{CommandID: wire.NewCommandID(), ID: r.ID, Step: events.StepPaused})
	m.Must(err)
	for range 3 {
		if ro := m.rolloutState(r.ID); ro.State != projections.RolloutPaused || ro.Wave != paused.Wave {
			t.Fatalf("a paused rollout moved from wave %d: %+v", paused.Wave, ro)
		}
	}
	_, err = m.H.Rollouts.ControlRollout(m.Ctx, wire.RolloutControl{CommandID: wire.NewCommandID(), ID: r.ID, Step: events.StepResumed})
	m.Must(err)
	eventually(t, "the resumed rollout to finish", func() bool { return m.rolloutState(r.ID).State == projections.RolloutFinished })
	if got := read("w-4"); got != "four\n" {
		t.Fatalf("w-4 holds %q after the resumed rollout", got)
	}
	m.Verified()
}

// A bake holds the next wave until the one before has stood its time, and
// a deadline halts a wave that has not applied in time, naming the node;
// read on an injected clock, with no sleeping.
func TestRolloutBakeAndDeadline(t *testing.T) {
	t.Parallel()
	m := newMesh(t)
	var ahead atomic.Int64 // how far the second controller's clock is ahead
	c2 := m.controller(-1)
	c2.Core.Now = func() time.Time { return time.Now().Add(time.Duration(ahead.Load())) }
	m.newBuildFor([]string{"b-1", "b-2", "b-3"}, func(n string) bool { return n != "b-3" }) // b-3 has no agent: it never applies
	r, err := m.H.Rollouts.StartRollout(m.Ctx, wire.RolloutRequest{CommandID: wire.NewCommandID(), Module: "motd", Bake: time.Hour, Deadline: 2 * time.Hour,
		Waves: []wire.WaveSpec{{Name: "one", Selector: "name=b-1"}, {Name: "two", Selector: "name=b-2"}, {Name: "three", Selector: "name=b-3"}}})
	m.Must(err)
	state := func() projections.Rollout {
		t.Helper()
		m.Must(c2.Rollouts.DriveRollouts(m.Ctx))
		// Read where it started, once that has folded every step the
		// second took: the second's read models may not hold the rollout
		// yet, and its drive then waits for its next tick.
		st, err := m.H.Core.Store.State(m.Ctx)
		m.Must(err)
		m.Must(m.H.Core.Proj.WaitFor(m.Ctx, st.LastSeq))
		ro, err := m.H.Rollouts.ShowRollout(m.Ctx, wire.NameRequest{Name: r.ID})
		m.Must(err)
		return ro.Rollout
	}
	eventually(t, "b-1 to apply the new build", func() bool {
		state()
		return m.Status()["b-1"].State == wire.StateCurrent && m.Status()["b-1"].Sequence == 2
	})
	for range 3 {
		if ro := state(); ro.Wave != 0 {
			t.Fatalf("the next wave started before the bake: %+v", ro)
		}
	}
	ahead.Store(int64(90 * time.Minute)) // the bake has passed
	eventually(t, "the third wave to start", func() bool { return state().Wave == 2 })
	if ro := state(); ro.State != projections.RolloutRunning {
		t.Fatalf("halted before its deadline: %+v", ro)
	}
	ahead.Store(int64(3 * time.Hour)) // the third wave's deadline has passed
	eventually(t, "the deadline to halt it", func() bool { return state().State == projections.RolloutHalted })
	if ro := state(); ro.Node != "b-3" || !strings.Contains(ro.Why, "deadline of 2h0m0s") {
		t.Fatalf("the halt: %+v", ro)
	}
}

// --max-parallel bounds a wave's nodes sent the build and not yet applied:
// with one node that never applies (no agent) and a bound of one, the
// others of its wave are not sent. Fails when the bound is not held.
func TestRolloutMaxParallel(t *testing.T) {
	t.Parallel()
	m := newMesh(t)
	for _, n := range []string{"p-1", "p-2", "p-3"} {
		m.Enroll(n)
		if n != "p-1" { // p-1, first by name, never applies
			m.Agent(n)
		}
	}
	m.WriteModule(`{"module":"motd","resources":[{"kind":"file","path":"/etc/motd","mode":"0644","content":"one\n"}]}`)
	for _, n := range []string{"p-1", "p-2", "p-3"} {
		m.Assign(n, "motd", nil)
	}
	for _, s := range m.Push("").Sent {
		if s.Node != "p-1" {
			m.Report(s.Node, s.Digest)
		}
	}
	m.WriteModule(`{"module":"motd","resources":[{"kind":"file","path":"/etc/motd","mode":"0644","content":"two\n"}]}`)
	// 25% of three nodes is less than one: one at a time.
	_, err := m.H.Rollouts.StartRollout(m.Ctx, wire.RolloutRequest{CommandID: wire.NewCommandID(), Module: "motd", MaxParallel: "25%",
		Waves: []wire.WaveSpec{{Name: "all", Selector: "*"}}})
	m.Must(err)
	eventually(t, "p-1 to be sent the build", func() bool {
		m.Must(m.H.Rollouts.DriveRollouts(m.Ctx))
		return m.Status()["p-1"].Sequence == 2
	})
	for range 3 {
		m.Must(m.H.Rollouts.DriveRollouts(m.Ctx))
		// push --behind does not jump the bound: the others wait their
		// turn, held, not behind.
		if r, err := m.H.Push.Push(m.Ctx, wire.PushRequest{CommandID: wire.NewCommandID(), Behind: true}); err != nil || slices.ContainsFunc(r.Sent, func(p wire.PushedNode) bool { return p.Node != "p-1" }) {
			t.Fatalf("push --behind during the rollout sent %+v (%v)", r.Sent, err)
		}
		for _, n := range []string{"p-2", "p-3"} {
			if s := m.Status()[n]; s.Sequence != 1 || s.State != wire.StateHeld || !strings.Contains(s.Detail, "waits its turn in wave 1 (all)") {
				t.Fatalf("%s was sent the build while p-1, within the bound of one, had not applied it: %+v", n, s)
			}
		}
	}
	if _, err = m.H.Rollouts.StartRollout(m.Ctx, wire.RolloutRequest{CommandID: wire.NewCommandID(), Module: "motd", MaxParallel: "0",
		Waves: []wire.WaveSpec{{Name: "all", Selector: "*"}}}); err == nil || !strings.Contains(err.Error(), "--max-parallel") {
		t.Fatalf("a bound of 0: %v", err)
	}
}

// A wave that applied its build still holds the next while a provider
// standing involving it is failing, and lets it go when the provider
// recovers; a program crash-looping on the new build halts the rollout,
// naming the node. Fails when the gate lets a wave pass a failing
// standing, or a crash loop does not halt.
func TestRolloutGates(t *testing.T) {
	t.Parallel()
	m := newMesh(t)
	for _, n := range []string{"g-1", "g-2"} {
		m.Enroll(n)
		m.Agent(n)
	}
	m.WriteModule(`{"module":"db","resources":[{"kind":"file","path":"/etc/db","mode":"0644","content":"one\n"}]}`)
	// A standing on g-1 holds the wave g-1 is in: cache there fails app,
	// which consumes from it (the only standing the fold takes, issue 29).
	m.WriteModule(`{"module":"cache","provides":["kv"],"resources":[{"kind":"file","path":"/etc/cache","mode":"0644","content":"one\n"}]}`)
	m.WriteModule(`{"module":"app","consumes":["kv"],"resources":[{"kind":"file","path":"/etc/app","mode":"0644","content":"one\n"}]}`)
	for _, n := range []string{"g-1", "g-2"} {
		m.Assign(n, "db", nil)
	}
	m.Assign("g-1", "cache", nil)
	m.Assign("g-2", "app", nil)
	for _, s := range m.Push("").Sent {
		m.Report(s.Node, s.Digest)
	}
	_, err := m.H.Status.Report(m.Ctx, wire.ReportRequest{CommandID: wire.NewCommandID(), Failing: true, Provider: "cache", Machine: "g-1", Consumer: "app", Word: "refuses logins"})
	m.Must(err)
	m.WriteModule(`{"module":"db","resources":[{"kind":"file","path":"/etc/db","mode":"0644","content":"two\n"}]}`)
	r, err := m.H.Rollouts.StartRollout(m.Ctx, wire.RolloutRequest{CommandID: wire.NewCommandID(), Module: "db",
		Waves: []wire.WaveSpec{{Name: "one", Selector: "name=g-1"}, {Name: "two", Selector: "name=g-2"}}})
	m.Must(err)
	eventually(t, "g-1 to apply the build", func() bool {
		m.rolloutState(r.ID)
		s := m.Status()["g-1"]
		return s.Sequence == 2 && s.State == wire.StateCurrent
	})
	for range 3 {
		if ro := m.rolloutState(r.ID); ro.Wave != 0 || ro.State != projections.RolloutRunning {
			t.Fatalf("the next wave started while cache on g-1 was failing app: %+v", ro)
		}
	}
	_, err = m.H.Status.Report(m.Ctx, wire.ReportRequest{CommandID: wire.NewCommandID(), Provider: "cache", Machine: "g-1", Consumer: "app"})
	m.Must(err)
	eventually(t, "the next wave once cache recovered", func() bool { return m.rolloutState(r.ID).Wave == 1 })

	// A program crash-looping on its new build halts the rollout.
	m.Enroll("c-1")
	m.AgentWith("c-1", filepath.Join(t.TempDir(), "root"), fast)
	m.WriteModule(`{"module":"svc","run":{"command":"/bin/sh","args":["-c","sleep 600"]}}`)
	m.Assign("c-1", "svc", nil)
	m.Report("c-1", m.Push("c-1").Sent[0].Digest)
	eventually(t, "svc to run", func() bool { return m.runtimeState("c-1", "svc").State == projections.RuntimeRunning })
	m.WriteModule(`{"module":"svc","run":{"command":"/bin/sh","args":["-c","echo no config >&2; exit 3"]}}`)
	r, err = m.H.Rollouts.StartRollout(m.Ctx, wire.RolloutRequest{CommandID: wire.NewCommandID(), Module: "svc", Bake: time.Hour,
		Waves: []wire.WaveSpec{{Name: "all", Selector: "*"}}})
	m.Must(err)
	eventually(t, "the crash loop to halt the rollout", func() bool { return m.rolloutState(r.ID).State == projections.RolloutHalted })
	if ro := m.rolloutState(r.ID); ro.Node != "c-1" || !strings.Contains(ro.Why, "crash-looping") {
		t.Fatalf("the halt: %+v", ro)
	}
	m.Verified()
}

// A wave's selector reads a node's facts where it has no label of that
// key (the label wins: the operator's word over detection), and N% takes
// that share of the module's nodes. Fails when facts are not read, or a
// label does not win over a fact.
func TestWaveSelectorsReadFacts(t *testing.T) {
	t.Parallel()
	m := newMesh(t)
	for _, n := range []string{"f-1", "f-2", "f-3"} {
		labels := map[string]string{}
		if n == "f-2" {
			labels["os"] = "plan9"
		}
		_, err := m.H.Nodes.Enroll(m.Ctx, wire.EnrollRequest{CommandID: wire.NewCommandID(), Name: n, Labels: labels})
		m.Must(err)
		if n != "f-3" { // f-3 has no agent: no facts
			m.Agent(n)
		}
	}
	eventually(t, "the agents' facts", func() bool {
		found := 0
		m.Must(m.H.Core.Proj.Read(func(v *projections.View) error {
			for _, n := range []string{"f-1", "f-2"} {
				if _, ok, _ := v.NodeFacts(n); ok {
					found++
				}
			}
			return nil
		}))
		return found == 2
	})
	m.WriteModule(`{"module":"motd","resources":[{"kind":"file","path":"/etc/motd","mode":"0644","content":"one\n"}]}`)
	for _, n := range []string{"f-1", "f-2", "f-3"} {
		m.Assign(n, "motd", nil)
	}
	plan, err := m.H.Rollouts.PlanRollout(m.Ctx, wire.RolloutPlanRequest{Module: "motd",
		Waves: []wire.WaveSpec{{Name: "here", Selector: "os=" + runtime.GOOS}, {Name: "third", Selector: "34%"}}})
	m.Must(err)
	var got []string
	for _, w := range plan.Waves {
		var names []string
		for _, p := range w.Nodes {
			names = append(names, p.Node)
		}
		got = append(got, w.Name+"="+strings.Join(names, ","))
	}
	// 34% of three nodes, rounded up, is two.
	if want := []string{"here=f-1", "third=f-2,f-3"}; !slices.Equal(got, want) {
		t.Fatalf("waves %v", got)
	}
}

// A rollout left by a stopped controller resumes in the next one, on the
// same stream, with no wave started twice (rule 23). Fails when the
// rollout's state lives anywhere but the log, or a step is retaken.
func TestARolloutResumesInAnotherController(t *testing.T) {
	t.Parallel()
	m := newMesh(t)
	m.newBuildFor([]string{"k-1", "k-2", "k-3"}, func(string) bool { return true })
	// A bake of an hour stops the first controller after the canary.
	r, err := m.H.Rollouts.StartRollout(m.Ctx, wire.RolloutRequest{CommandID: wire.NewCommandID(), Module: "motd", Bake: time.Hour,
		Waves: []wire.WaveSpec{{Name: "canary", Selector: "name=k-1"}, {Name: "rest", Selector: "*"}}})
	m.Must(err)
	eventually(t, "the canary to apply", func() bool {
		m.rolloutState(r.ID)
		s := m.Status()["k-1"]
		return s.Sequence == 2 && s.State == wire.StateCurrent
	})
	m.Must(m.Ctrl.Close())

	// The next controller, its clock past the bake, takes it from there.
	c2 := m.controller(-1)
	c2.Core.Now = func() time.Time { return time.Now().Add(2 * time.Hour) }
	m.H = c2
	eventually(t, "the rollout to finish in the next controller", func() bool { return m.rolloutState(r.ID).State == projections.RolloutFinished })
	if s := m.steps(r.ID); s["wave started 0"] != 1 || s["wave started 1"] != 1 || s["finished 1"] != 1 {
		t.Fatalf("steps of the rollout: %v (each once)", s)
	}
	m.Verified()
}
