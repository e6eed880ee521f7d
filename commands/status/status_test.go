package status_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshctl/mesh/agent/agenttest"

	"github.com/meshctl/mesh/wire"
)

// Every state of rule 10, each reached the way an operator would reach it.
func TestEveryNodeState(t *testing.T) {
	m := agenttest.New(t)
	for _, n := range []string{"never", "orphan", "idle", "good", "broken", "ahead", "moved", "hand"} {
		m.Enroll(n, "linux")
	}
	m.Register("postgres.json")
	m.Register("app.json")
	m.WriteModule(`{"module":"linked","resources":[{"kind":"file","path":"/etc/link/x","mode":"0644","content":"x"}]}`)

	// cannot be composed: it needs a queue and nobody provides one.
	m.WriteModule(`{"module":"lonely","consumes":["queue"]}`)
	m.Assign("orphan", "lonely", nil)
	if n := m.Status()["orphan"]; n.State != wire.StateCannotCompose || !strings.Contains(n.Detail, "no assigned module provides") {
		t.Fatalf("orphan: %+v", n)
	}
	// never sent.
	if n := m.Status()["never"]; n.State != wire.StateNeverSent {
		t.Fatalf("never: %+v", n)
	}
	// waiting: sent, and no agent to report.
	m.Push("idle")
	if n := m.Status()["idle"]; n.State != wire.StateWaiting {
		t.Fatalf("idle: %+v", n)
	}
	// current: sent, applied, and would be sent the same.
	m.Agent("good")
	m.Push("good")
	m.WaitState("good", wire.StateCurrent)
	// failed: a resource through a symlink out of the root.
	root, _ := m.Agent("broken")
	m.Must(os.MkdirAll(filepath.Join(root, "etc"), 0o755))
	m.Must(os.Symlink(t.TempDir(), filepath.Join(root, "etc/link")))
	m.Assign("broken", "linked", nil)
	m.Push("broken")
	if n := m.WaitState("broken", wire.StateFailed); !strings.Contains(n.Detail, "/etc/link/x") {
		t.Fatalf("broken: %+v", n)
	}
	// refused: the node has applied sequences the log no longer holds.
	aheadRoot := filepath.Join(t.TempDir(), "root")
	m.Must(os.MkdirAll(aheadRoot+".state", 0o700))
	m.Must(os.WriteFile(filepath.Join(aheadRoot+".state", "state.json"), []byte(`{"node":"ahead","last_sequence":100}`), 0o600))
	m.AgentAt("ahead", aheadRoot)
	m.Push("ahead")
	if n := m.WaitState("ahead", wire.StateRefused); !strings.Contains(n.Detail, "replay") {
		t.Fatalf("ahead: %+v", n)
	}
	// behind: applied, then a setting changed.
	m.Agent("moved")
	m.Assign("moved", "postgres", map[string]string{"password": "a"})
	m.Push("moved")
	m.WaitState("moved", wire.StateCurrent)
	m.Assign("moved", "postgres", map[string]string{"password": "b"})
	if n := m.Status()["moved"]; n.State != wire.StateBehind {
		t.Fatalf("moved: %+v", n)
	}
	// A hand declaration holds its node: held, not behind, and left out of
	// push --behind (issue 31).
	m.Agent("hand")
	m.Push("hand")
	m.WaitState("hand", wire.StateCurrent)
	_, err := m.H.Push.Declare(m.Ctx, wire.DeclareRequest{CommandID: wire.NewCommandID(), Node: "hand", File: "h.json",
		Body: `{"resources":[{"kind":"file","path":"/etc/motd","mode":"0644","content":"hi\n"}]}`})
	m.Must(err)
	if n := m.WaitState("hand", wire.StateHeld); !strings.Contains(n.Detail, "hand declaration") {
		t.Fatalf("hand: %+v", n)
	}

	// A push naming another node reads no row but that node's (and those
	// it links to): the held one is named from the index of held nodes,
	// and a push of a list names it only when the list holds it.
	named, err := m.H.Push.Push(m.Ctx, wire.PushRequest{CommandID: wire.NewCommandID(), Node: "good"})
	m.Must(err)
	if len(named.Sent) != 1 || named.Sent[0].Node != "good" || len(named.Held) != 1 || named.Held[0].Node != "hand" {
		t.Fatalf("a push naming good: sent %+v, held %+v", named.Sent, named.Held)
	}
	listed, err := m.H.Push.Push(m.Ctx, wire.PushRequest{CommandID: wire.NewCommandID(), Nodes: []string{"good", "idle"}})
	m.Must(err)
	if len(listed.Sent) != 2 || len(listed.Held) != 0 {
		t.Fatalf("a push of good and idle: sent %+v, held %+v", listed.Sent, listed.Held)
	}
	m.WaitState("good", wire.StateCurrent)

	s, err := m.H.Status.Status(m.Ctx, wire.StatusRequest{})
	m.Must(err)
	if s.Well {
		t.Fatal("status calls a mesh with failed, refused and behind nodes well")
	}
	// push --behind sends exactly the nodes that are not current.
	r, err := m.H.Push.Push(m.Ctx, wire.PushRequest{CommandID: wire.NewCommandID(), Behind: true})
	m.Must(err)
	sent := map[string]bool{}
	for _, p := range r.Sent {
		sent[p.Node] = true
	}
	for _, n := range []string{"never", "idle", "broken", "ahead", "moved"} {
		if !sent[n] {
			t.Errorf("push --behind did not send %s: %+v", n, r)
		}
	}
	if sent["hand"] || len(r.Held) != 1 || r.Held[0].Node != "hand" {
		t.Fatalf("push --behind sent the node a hand declaration holds, or did not name it: %+v", r)
	}
	if sent["good"] || len(r.Unsent) != 1 || r.Unsent[0].Node != "orphan" {
		t.Fatalf("push --behind: sent %v, unsent %+v", sent, r.Unsent)
	}
}

// Standings: the newest word per triple until a recovery; the mesh is well
// only when nothing is failing.
func TestStandings(t *testing.T) {
	m := agenttest.New(t)
	m.Enroll("auth-1", "linux")
	m.Enroll("app-1", "linux")
	m.Register("postgres.json")
	m.Register("app.json")
	// A standing is postgres's on its machine toward a consumer of it.
	m.Assign("auth-1", "postgres", map[string]string{"password": "x"})
	m.Assign("app-1", "app", nil)
	m.Agent("auth-1")
	m.Agent("app-1")
	m.Push("")
	m.WaitState("auth-1", wire.StateCurrent)
	m.WaitState("app-1", wire.StateCurrent)
	report := func(failing bool, word string) wire.Reported {
		r, err := m.H.Status.Report(m.Ctx, wire.ReportRequest{CommandID: wire.NewCommandID(), Failing: failing,
			Provider: "postgres", Machine: "auth-1", Consumer: "app", Word: word})
		m.Must(err)
		return r
	}
	well := func() (bool, []wire.StandingView) {
		s, err := m.H.Status.Status(m.Ctx, wire.StatusRequest{})
		m.Must(err)
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
	view, err := m.H.Status.ShowNode(m.Ctx, wire.NameRequest{Name: "auth-1"})
	m.Must(err)
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
	if _, err := m.H.Status.Report(m.Ctx, wire.ReportRequest{CommandID: wire.NewCommandID(), Failing: true, Provider: "nope", Machine: "auth-1", Consumer: "app", Word: "x"}); err == nil {
		t.Fatal("a standing of an unknown module was accepted")
	}
}

// A named push leaves the mesh consistent: a consumer whose provider's
// settings changed is sent too, by name, in the same push.
func TestNamedPushSendsItsConsequences(t *testing.T) {
	m := agenttest.New(t)
	m.Enroll("db-1", "linux")
	m.Enroll("app-1", "linux")
	m.Enroll("bystander", "linux")
	m.Register("postgres.json")
	m.Register("app.json")
	m.Assign("db-1", "postgres", map[string]string{"password": "x"})
	m.Assign("app-1", "app", nil)
	m.Push("")
	m.Assign("db-1", "postgres", map[string]string{"password": "x", "port": "6000"})
	r := m.Push("db-1")
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
	m := agenttest.New(t)
	m.Enroll("ahead")
	root := filepath.Join(t.TempDir(), "root")
	m.Must(os.MkdirAll(root+".state", 0o700))
	m.Must(os.WriteFile(filepath.Join(root+".state", "state.json"), []byte(`{"node":"ahead","last_sequence":41}`), 0o600))
	m.AgentAt("ahead", root)
	m.Push("ahead")
	m.WaitState("ahead", wire.StateRefused)
	r := m.Push("ahead")
	if s := r.Sent[0]; s.Sequence != 42 || !strings.Contains(s.Note, "above 41") {
		t.Fatalf("the push after a refusal: %+v", s)
	}
	m.WaitState("ahead", wire.StateCurrent)
}

// status --as-of before and after a change answers differently, and
// correctly; so does node show --as-of.
func TestStatusAsOf(t *testing.T) {
	m := agenttest.New(t)
	m.Enroll("db-1", "linux")
	m.Register("postgres.json")
	m.Assign("db-1", "postgres", map[string]string{"password": "a"})
	m.Agent("db-1")
	m.Push("db-1")
	m.WaitState("db-1", wire.StateCurrent)
	// The controller's clock an hour on: what is appended now is after
	// before, with no sleeping (the injected clock, not the wall's).
	before := time.Now()
	m.H.Core.Store.Now = func() time.Time { return before.Add(time.Hour) }
	m.Assign("db-1", "postgres", map[string]string{"password": "b"})
	if m.Status()["db-1"].State != wire.StateBehind {
		t.Fatal("not behind after the change")
	}
	past, err := m.H.Status.Status(m.Ctx, wire.StatusRequest{AsOf: before})
	m.Must(err)
	if past.AsOf == nil || !past.Well || past.Nodes[0].State != wire.StateCurrent {
		t.Fatalf("status as of before the change: %+v", past)
	}
	show, err := m.H.Status.ShowNode(m.Ctx, wire.NameRequest{Name: "db-1", AsOf: before})
	m.Must(err)
	if show.AsOf == nil || show.State != wire.StateCurrent || show.Assignments[0].Settings["password"] != "(secret, version 1)" {
		t.Fatalf("node show as of before the change: %+v", show)
	}
	long := time.Now().Add(-time.Hour)
	ancient, err := m.H.Status.Status(m.Ctx, wire.StatusRequest{AsOf: long})
	m.Must(err)
	if len(ancient.Nodes) != 0 {
		t.Fatalf("an hour ago there were no nodes: %+v", ancient.Nodes)
	}
}

// A node failing the same way for over six hours is pushed anyway by
// push --behind, with a note that timing is unlikely to be the cause.
func TestLongFailingNodeIsPushedWithANote(t *testing.T) {
	m := agenttest.New(t)
	m.Enroll("web-1", "linux")
	m.WriteModule(`{"module":"linked","resources":[{"kind":"file","path":"/etc/link/x","mode":"0644","content":"x"}]}`)
	root, _ := m.Agent("web-1")
	m.Must(os.MkdirAll(filepath.Join(root, "etc"), 0o755))
	m.Must(os.Symlink(t.TempDir(), filepath.Join(root, "etc/link")))
	m.Assign("web-1", "linked", nil)
	m.Push("web-1")
	first := m.WaitState("web-1", wire.StateFailed)
	m.Push("web-1") // fails the same way again
	row, _, _ := m.H.Core.Proj.Node("web-1")
	second := m.Report("web-1", row.LastSent.Digest)
	if first.FailingSince == nil || !second.FailingSince.Equal(*first.FailingSince) {
		t.Fatalf("failing the same way must keep its start: first %v, then %v", first.FailingSince, second.FailingSince)
	}
	m.H.Core.Now = func() time.Time { return time.Now().Add(7 * time.Hour) }
	r, err := m.H.Push.Push(m.Ctx, wire.PushRequest{CommandID: wire.NewCommandID(), Behind: true})
	m.Must(err)
	if len(r.Sent) != 1 || !strings.Contains(r.Sent[0].Note, "the cause is unlikely to be timing") {
		t.Fatalf("push --behind seven hours on: %+v", r.Sent)
	}
}
