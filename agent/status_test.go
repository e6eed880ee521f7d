package agent_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshctl/mesh/commands"
)

func (m *mesh) status() map[string]commands.NodeStatus {
	m.t.Helper()
	s, err := m.h.Status(m.ctx, commands.StatusRequest{})
	m.must(err)
	out := map[string]commands.NodeStatus{}
	for _, n := range s.Nodes {
		out[n.Name] = n
	}
	return out
}

// waitState polls status until node is in state.
func (m *mesh) waitState(node string, state commands.State) commands.NodeStatus {
	m.t.Helper()
	var n commands.NodeStatus
	eventually(m.t, fmt.Sprintf("%s to be %s", node, state), func() bool { n = m.status()[node]; return n.State == state })
	return n
}

func (m *mesh) writeModule(doc string) {
	m.t.Helper()
	_, err := m.h.RegisterModule(m.ctx, commands.RegisterRequest{CommandID: commands.NewCommandID(), File: "m.json", Manifest: doc})
	m.must(err)
}

// Every state of rule 10, each reached the way an operator would reach it.
func TestEveryNodeState(t *testing.T) {
	m := newMesh(t)
	for _, n := range []string{"never", "orphan", "idle", "good", "broken", "ahead", "moved", "hand"} {
		m.enroll(n, "linux")
	}
	m.register("postgres.json")
	m.register("app.json")
	m.writeModule(`{"module":"linked","resources":[{"kind":"file","path":"/etc/link/x","mode":"0644","content":"x"}]}`)

	// cannot be composed: it needs a queue and nobody provides one.
	m.writeModule(`{"module":"lonely","consumes":["queue"]}`)
	m.assign("orphan", "lonely", nil)
	if n := m.status()["orphan"]; n.State != commands.StateCannotCompose || !strings.Contains(n.Detail, "no assigned module provides") {
		t.Fatalf("orphan: %+v", n)
	}
	// never sent.
	if n := m.status()["never"]; n.State != commands.StateNeverSent {
		t.Fatalf("never: %+v", n)
	}
	// waiting: sent, and no agent to report.
	m.push("idle")
	if n := m.status()["idle"]; n.State != commands.StateWaiting {
		t.Fatalf("idle: %+v", n)
	}
	// current: sent, applied, and would be sent the same.
	m.agent("good")
	m.push("good")
	m.waitState("good", commands.StateCurrent)
	// failed: a resource through a symlink out of the root.
	root, _ := m.agent("broken")
	m.must(os.MkdirAll(filepath.Join(root, "etc"), 0o755))
	m.must(os.Symlink(t.TempDir(), filepath.Join(root, "etc/link")))
	m.assign("broken", "linked", nil)
	m.push("broken")
	if n := m.waitState("broken", commands.StateFailed); !strings.Contains(n.Detail, "/etc/link/x") {
		t.Fatalf("broken: %+v", n)
	}
	// refused: the node has applied sequences the log no longer holds.
	aheadRoot := filepath.Join(t.TempDir(), "root")
	m.must(os.MkdirAll(aheadRoot+".state", 0o700))
	m.must(os.WriteFile(filepath.Join(aheadRoot+".state", "state.json"), []byte(`{"node":"ahead","last_sequence":100}`), 0o600))
	m.agentAt("ahead", aheadRoot)
	m.push("ahead")
	if n := m.waitState("ahead", commands.StateRefused); !strings.Contains(n.Detail, "replay") {
		t.Fatalf("ahead: %+v", n)
	}
	// behind: applied, then a setting changed.
	m.agent("moved")
	m.assign("moved", "postgres", map[string]string{"password": "a"})
	m.push("moved")
	m.waitState("moved", commands.StateCurrent)
	m.assign("moved", "postgres", map[string]string{"password": "b"})
	if n := m.status()["moved"]; n.State != commands.StateBehind {
		t.Fatalf("moved: %+v", n)
	}
	// A hand declaration is read as behind: its builds are unknown.
	m.agent("hand")
	m.push("hand")
	m.waitState("hand", commands.StateCurrent)
	_, err := m.h.Declare(m.ctx, commands.DeclareRequest{CommandID: commands.NewCommandID(), Node: "hand", File: "h.json",
		Body: `{"resources":[{"kind":"file","path":"/etc/motd","mode":"0644","content":"hi\n"}]}`})
	m.must(err)
	if n := m.status()["hand"]; n.State != commands.StateBehind || !strings.Contains(n.Detail, "hand-written") {
		t.Fatalf("hand: %+v", n)
	}

	s, err := m.h.Status(m.ctx, commands.StatusRequest{})
	m.must(err)
	if s.Well {
		t.Fatal("status calls a mesh with failed, refused and behind nodes well")
	}
	// push --behind sends exactly the nodes that are not current.
	r, err := m.h.Push(m.ctx, commands.PushRequest{CommandID: commands.NewCommandID(), Behind: true})
	m.must(err)
	sent := map[string]bool{}
	for _, p := range r.Sent {
		sent[p.Node] = true
	}
	for _, n := range []string{"never", "idle", "broken", "ahead", "moved", "hand"} {
		if !sent[n] {
			t.Errorf("push --behind did not send %s: %+v", n, r)
		}
	}
	if sent["good"] || len(r.Unsent) != 1 || r.Unsent[0].Node != "orphan" {
		t.Fatalf("push --behind: sent %v, unsent %+v", sent, r.Unsent)
	}
}

// Standings: the newest word per triple until a recovery; the mesh is well
// only when nothing is failing.
func TestStandings(t *testing.T) {
	m := newMesh(t)
	m.enroll("auth-1", "linux")
	m.register("postgres.json")
	m.register("app.json")
	m.agent("auth-1")
	m.push("auth-1")
	m.waitState("auth-1", commands.StateCurrent)
	report := func(failing bool, word string) commands.Reported {
		r, err := m.h.Report(m.ctx, commands.ReportRequest{CommandID: commands.NewCommandID(), Failing: failing,
			Provider: "postgres", Machine: "auth-1", Consumer: "app", Word: word})
		m.must(err)
		return r
	}
	well := func() (bool, []commands.StandingView) {
		s, err := m.h.Status(m.ctx, commands.StatusRequest{})
		m.must(err)
		return s.Well, s.Standings
	}
	if ok, _ := well(); !ok {
		t.Fatal("not well before anything failed")
	}
	report(true, "connection refused")
	report(true, "too many connections")
	ok, st := well()
	if ok || len(st) != 1 || st[0].Word != "too many connections" || st[0].Provider != "postgres" || st[0].Machine != "auth-1" || st[0].Consumer != "app" {
		t.Fatalf("failing: well=%v %+v", ok, st)
	}
	if !st[0].Since.Before(st[0].Updated) {
		t.Fatalf("a new word must keep since the first failing report: %+v", st[0])
	}
	view, err := m.h.ShowNode(m.ctx, commands.NameRequest{Name: "auth-1"})
	m.must(err)
	if len(view.Standings) != 1 {
		t.Fatalf("node show does not name the standing of its machine: %+v", view.Standings)
	}
	if r := report(false, ""); !r.Changed {
		t.Fatal("recovery not recorded")
	}
	if ok, st := well(); !ok || len(st) != 0 {
		t.Fatalf("after recovery: well=%v %+v", ok, st)
	}
	if r := report(false, ""); r.Changed {
		t.Fatal("a recovery with nothing failing appended something")
	}
	if _, err := m.h.Report(m.ctx, commands.ReportRequest{CommandID: commands.NewCommandID(), Failing: true, Provider: "nope", Machine: "auth-1", Consumer: "app", Word: "x"}); err == nil {
		t.Fatal("a standing of an unknown module was accepted")
	}
}

// A named push leaves the mesh consistent: a consumer whose provider's
// settings changed is sent too, by name, in the same push.
func TestNamedPushSendsItsConsequences(t *testing.T) {
	m := newMesh(t)
	m.enroll("db-1", "linux")
	m.enroll("app-1", "linux")
	m.enroll("bystander", "linux")
	m.register("postgres.json")
	m.register("app.json")
	m.assign("db-1", "postgres", map[string]string{"password": "x"})
	m.assign("app-1", "app", nil)
	m.push("")
	m.assign("db-1", "postgres", map[string]string{"password": "x", "port": "6000"})
	r := m.push("db-1")
	notes := map[string]string{}
	for _, p := range r.Sent {
		notes[p.Node] = p.Note
	}
	if len(r.Sent) != 2 || !strings.Contains(notes["app-1"], "as a consequence of db-1") {
		t.Fatalf("named push: %+v", r.Sent)
	}
	if _, sent := notes["bystander"]; sent {
		t.Fatal("a node unrelated to db-1 was pushed")
	}
}

// A node ahead of the log (it applied sequences the log lost) refuses, says
// the highest it applied, and the next push is numbered above it and applied.
func TestLostTailConvergesOnTheNextPush(t *testing.T) {
	m := newMesh(t)
	m.enroll("ahead")
	root := filepath.Join(t.TempDir(), "root")
	m.must(os.MkdirAll(root+".state", 0o700))
	m.must(os.WriteFile(filepath.Join(root+".state", "state.json"), []byte(`{"node":"ahead","last_sequence":41}`), 0o600))
	m.agentAt("ahead", root)
	m.push("ahead")
	m.waitState("ahead", commands.StateRefused)
	r := m.push("ahead")
	if s := r.Sent[0]; s.Sequence != 42 || !strings.Contains(s.Note, "above 41") {
		t.Fatalf("the push after a refusal: %+v", s)
	}
	m.waitState("ahead", commands.StateCurrent)
}

// status --as-of before and after a change answers differently, and
// correctly; so does node show --as-of.
func TestStatusAsOf(t *testing.T) {
	m := newMesh(t)
	m.enroll("db-1", "linux")
	m.register("postgres.json")
	m.assign("db-1", "postgres", map[string]string{"password": "a"})
	m.agent("db-1")
	m.push("db-1")
	m.waitState("db-1", commands.StateCurrent)
	// The controller's clock an hour on: what is appended now is after
	// before, with no sleeping (the injected clock, not the wall's).
	before := time.Now()
	m.h.Store.Now = func() time.Time { return before.Add(time.Hour) }
	m.assign("db-1", "postgres", map[string]string{"password": "b"})
	if m.status()["db-1"].State != commands.StateBehind {
		t.Fatal("not behind after the change")
	}
	past, err := m.h.Status(m.ctx, commands.StatusRequest{AsOf: before})
	m.must(err)
	if past.AsOf == nil || !past.Well || past.Nodes[0].State != commands.StateCurrent {
		t.Fatalf("status as of before the change: %+v", past)
	}
	show, err := m.h.ShowNode(m.ctx, commands.NameRequest{Name: "db-1", AsOf: before})
	m.must(err)
	if show.AsOf == nil || show.State != commands.StateCurrent || show.Assignments[0].Settings["password"] != "(secret, version 1)" {
		t.Fatalf("node show as of before the change: %+v", show)
	}
	long := time.Now().Add(-time.Hour)
	ancient, err := m.h.Status(m.ctx, commands.StatusRequest{AsOf: long})
	m.must(err)
	if len(ancient.Nodes) != 0 {
		t.Fatalf("an hour ago there were no nodes: %+v", ancient.Nodes)
	}
}

// A node failing the same way for over six hours is pushed anyway by
// push --behind, with a note that timing is unlikely to be the cause.
func TestLongFailingNodeIsPushedWithANote(t *testing.T) {
	m := newMesh(t)
	m.enroll("web-1", "linux")
	m.writeModule(`{"module":"linked","resources":[{"kind":"file","path":"/etc/link/x","mode":"0644","content":"x"}]}`)
	root, _ := m.agent("web-1")
	m.must(os.MkdirAll(filepath.Join(root, "etc"), 0o755))
	m.must(os.Symlink(t.TempDir(), filepath.Join(root, "etc/link")))
	m.assign("web-1", "linked", nil)
	m.push("web-1")
	first := m.waitState("web-1", commands.StateFailed)
	m.push("web-1") // fails the same way again
	row, _, _ := m.h.Proj.Node("web-1")
	second := m.report("web-1", row.LastSent.Digest)
	if first.FailingSince == nil || !second.FailingSince.Equal(*first.FailingSince) {
		t.Fatalf("failing the same way must keep its start: first %v, then %v", first.FailingSince, second.FailingSince)
	}
	m.h.Now = func() time.Time { return time.Now().Add(7 * time.Hour) }
	r, err := m.h.Push(m.ctx, commands.PushRequest{CommandID: commands.NewCommandID(), Behind: true})
	m.must(err)
	if len(r.Sent) != 1 || !strings.Contains(r.Sent[0].Note, "the cause is unlikely to be timing") {
		t.Fatalf("push --behind seven hours on: %+v", r.Sent)
	}
}
