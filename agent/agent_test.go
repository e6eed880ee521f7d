package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshctl/mesh/agent"
	"github.com/meshctl/mesh/commands"
	"github.com/meshctl/mesh/compose"
	"github.com/meshctl/mesh/declaration"
	"github.com/meshctl/mesh/embedded"
	"github.com/meshctl/mesh/embedded/embeddedtest"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/projections"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"
)

// mesh is a controller and agents on one embedded server, in this process.
type mesh struct {
	t    *testing.T
	srv  *embedded.Server
	ctrl *commands.Controller
	h    *commands.Handlers
	ctx  context.Context
	home string
}

func newMesh(t *testing.T) *mesh {
	t.Helper()
	srv := embeddedtest.Server(t)
	home := t.TempDir()
	ctrl, err := commands.StartController(context.Background(), embeddedtest.Conn(t, srv), commands.ControllerConfig{Home: home})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ctrl.Close() })
	return &mesh{t: t, srv: srv, ctrl: ctrl, h: ctrl.Handlers, ctx: context.Background(), home: home}
}

func (m *mesh) homeDir() string { return m.home }

func (m *mesh) must(err error) {
	m.t.Helper()
	if err != nil {
		m.t.Fatal(err)
	}
}

func (m *mesh) enroll(name string, caps ...string) {
	m.t.Helper()
	_, err := m.h.Enroll(m.ctx, commands.EnrollRequest{CommandID: commands.NewCommandID(), Name: name, Capabilities: caps})
	m.must(err)
}

func (m *mesh) register(file string) {
	m.t.Helper()
	data, err := os.ReadFile("../examples/" + file)
	m.must(err)
	_, err = m.h.RegisterModule(m.ctx, commands.RegisterRequest{CommandID: commands.NewCommandID(), File: file, Manifest: string(data)})
	m.must(err)
}

func (m *mesh) assign(node, module string, settings map[string]string) {
	m.t.Helper()
	_, err := m.h.Assign(m.ctx, commands.AssignRequest{CommandID: commands.NewCommandID(), Node: node, Module: module, Settings: settings})
	m.must(err)
}

func (m *mesh) push(node string) commands.PushReply {
	m.t.Helper()
	r, err := m.h.Push(m.ctx, commands.PushRequest{CommandID: commands.NewCommandID(), Node: node})
	m.must(err)
	return r
}

// agent starts node's agent on its own connection, with a root of its own.
func (m *mesh) agent(node string) (root string, stop func()) {
	m.t.Helper()
	root = filepath.Join(m.t.TempDir(), "root")
	return root, m.agentAt(node, root)
}

func (m *mesh) agentAt(node, root string) func() {
	m.t.Helper()
	return m.agentWith(node, root, func(*agent.Config) {})
}

// agentWith starts node's agent on root with its configuration changed
// by set (the supervision's and drift check's times, for a test).
func (m *mesh) agentWith(node, root string, set func(*agent.Config)) func() {
	m.t.Helper()
	id, err := m.h.Join(m.ctx, commands.NameRequest{Name: node})
	m.must(err)
	j := agent.Join{Mesh: id.Mesh, Bus: m.srv.ClientURL(), Node: node, Key: id.Key, Seed: id.Seed}
	cfg := agent.Config{Join: j, Root: root}
	set(&cfg)
	a, err := agent.Open(m.ctx, embeddedtest.Conn(m.t, m.srv), cfg)
	m.must(err)
	ctx, cancel := context.WithCancel(m.ctx)
	done := make(chan struct{})
	go func() { defer close(done); a.Run(ctx) }()
	var once sync.Once
	stop := func() { once.Do(func() { cancel(); <-done; a.Close() }) }
	m.t.Cleanup(stop)
	return stop
}

// settle is embeddedtest.Settle: how long a test waits for agents and the fold.
const settle = embeddedtest.Settle

// report waits until node has reported on digest and answers its newest
// report on it, from the history index: a report on something other than
// what the node was last sent (a forged or replayed declaration) is there,
// though it does not displace the node's report on its last send.
func (m *mesh) report(node, digest string) projections.Report {
	m.t.Helper()
	return m.reportWhere(node, digest, "")
}

// reportWhere is report, waiting for a report of that outcome ("" any).
func (m *mesh) reportWhere(node, digest string, outcome events.Outcome) projections.Report {
	m.t.Helper()
	outcomes := map[byte]events.Outcome{projections.HistoryApplied: events.OutcomeApplied, projections.HistoryFailed: events.OutcomeFailed, projections.HistoryRefused: events.OutcomeRefused}
	var found *projections.Report
	eventually(m.t, fmt.Sprintf("%s to report on %s", node, digest), func() bool {
		m.must(m.h.Proj.Read(func(v *projections.View) error {
			entries, err := v.History(node, time.Time{}, time.Time{})
			for _, e := range entries {
				if o, ok := outcomes[e.Kind]; ok && e.Digest == digest && (outcome == "" || o == outcome) {
					found = &projections.Report{Outcome: o, Sequence: e.Sequence, Digest: e.Digest, Reason: e.Reason, Failed: e.Failed, Highest: e.Highest, At: e.At, StreamSeq: e.Seq}
				}
			}
			return err
		}))
		return found != nil
	})
	// The node row's report, where it is this one, says more (since when
	// it has been failing).
	if n, _, _ := m.h.Proj.Node(node); n.LastReport != nil && n.LastReport.StreamSeq == found.StreamSeq {
		return *n.LastReport
	}
	return *found
}

// publish puts a DeclarationSent on node's subject with a plain client, as
// anyone who can reach the bus could.
func (m *mesh) publish(node string, ev events.DeclarationSent) {
	m.t.Helper()
	data, err := events.Encode(events.NodeAggregate(node), "forged-"+commands.NewCommandID(), 0, time.Now(), ev)
	m.must(err)
	js, _ := jetstream.New(embeddedtest.Conn(m.t, m.srv))
	_, err = js.Publish(m.ctx, events.DeclarationSubject(node), data)
	m.must(err)
}

func sealedEvent(t *testing.T, kp nkeys.KeyPair, d declaration.Declaration) events.DeclarationSent {
	s, err := declaration.Seal(kp, d)
	if err != nil {
		t.Fatal(err)
	}
	return events.DeclarationSent{Node: d.Node, Sequence: d.Sequence, Digest: s.Digest(), Declaration: s.Bytes, Signature: s.Signature, Key: s.Key}
}

func str(s string) *string { return &s }

func TestPushAppliesWithTheProvidersAddress(t *testing.T) {
	m := newMesh(t)
	m.enroll("db-1", "linux")
	m.enroll("app-1", "linux")
	dbRoot, _ := m.agent("db-1")
	appRoot, _ := m.agent("app-1")
	m.register("postgres.json")
	m.register("app.json")
	m.assign("db-1", "postgres", map[string]string{"password": "s3cret", "port": "6543"})
	m.assign("app-1", "app", nil)
	r := m.push("")
	if len(r.Sent) != 2 || len(r.Unsent) != 0 {
		t.Fatalf("push: %+v", r)
	}
	for _, s := range r.Sent {
		if rep := m.report(s.Node, s.Digest); rep.Outcome != "applied" {
			t.Fatalf("%s: %+v", s.Node, rep)
		}
	}
	// Rule 4: "is it current?" compares the content digest last sent with
	// the content that would be sent now, which is what plan calls its digest.
	plan, err := m.h.Plan(m.ctx, commands.NameRequest{Name: "app-1"})
	m.must(err)
	row, _, _ := m.h.Proj.Node("app-1")
	if plan.Digest != row.LastSent.ContentDigest || plan.Digest == row.LastSent.Digest {
		t.Fatalf("plan digest %s, sent content digest %s, sent digest %s", plan.Digest, row.LastSent.ContentDigest, row.LastSent.Digest)
	}
	conf, err := os.ReadFile(filepath.Join(appRoot, "etc/app/app.conf"))
	if err != nil || !strings.Contains(string(conf), "database = db-1:6543") {
		t.Fatalf("app.conf: %q %v", conf, err)
	}
	info, err := os.Stat(filepath.Join(dbRoot, "etc/postgres/postgres.conf"))
	if err != nil || info.Mode().Perm() != 0o640 {
		t.Fatalf("postgres.conf: %v %v", info, err)
	}
}

// A declaration signed by another key, published on the node's subject with
// a plain NATS client, is refused and nothing is written.
func TestForgedDeclarationIsRefused(t *testing.T) {
	m := newMesh(t)
	m.enroll("web-1")
	root, _ := m.agent("web-1")
	forger, _ := nkeys.CreateAccount()
	d := declaration.Declaration{Mesh: m.h.Mesh, Node: "web-1", Sequence: 99, ComposedAt: time.Now(),
		Resources: []compose.Resource{{Path: "/etc/evil", Kind: "file", Mode: "0644", Content: str("owned\n"), Module: "x"}}}
	ev := sealedEvent(t, forger, d)
	m.publish("web-1", ev)
	rep := m.report("web-1", ev.Digest)
	if rep.Outcome != "refused" || !strings.Contains(rep.Reason, "signature does not verify") {
		t.Fatalf("forged: %+v", rep)
	}
	if _, err := os.Stat(filepath.Join(root, "etc/evil")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a forged declaration wrote to the root: %v", err)
	}
}

// A replayed older declaration is refused; so is another node's.
func TestReplayAndOtherNodesDeclarationsAreRefused(t *testing.T) {
	m := newMesh(t)
	m.enroll("web-1")
	m.enroll("web-2")
	m.agent("web-1")
	first := m.push("web-1").Sent[0]
	m.report("web-1", first.Digest)
	second := m.push("web-1").Sent[0]
	m.report("web-1", second.Digest)

	// The first declaration's event, published again verbatim.
	old, err := m.h.Store.Get(m.ctx, first.StreamSeq)
	m.must(err)
	_, ev, _ := events.Decode(old.Data)
	m.publish("web-1", ev.(events.DeclarationSent))
	rep := m.reportWhere("web-1", first.Digest, "refused")
	if rep.Outcome != "refused" || !strings.Contains(rep.Reason, "replay") || rep.Highest != second.Sequence {
		t.Fatalf("replay: %+v", rep)
	}
	// The refusal is in its history; it says nothing of what the node was
	// last sent, which it still holds: a replay does not change its state.
	if n, _, _ := m.h.Proj.Node("web-1"); n.LastReport == nil || n.LastReport.Digest != second.Digest || n.LastReport.Outcome != "applied" {
		t.Fatalf("a replayed declaration changed web-1's report on its last send: %+v", n.LastReport)
	}

	// web-2's declaration, correctly signed, on web-1's subject.
	other := m.push("web-2").Sent[0]
	msg, err := m.h.Store.Get(m.ctx, other.StreamSeq)
	m.must(err)
	_, ev, _ = events.Decode(msg.Data)
	m.publish("web-1", ev.(events.DeclarationSent))
	rep = m.report("web-1", other.Digest)
	if rep.Outcome != "refused" || !strings.Contains(rep.Reason, "another node") {
		t.Fatalf("another node's declaration: %+v", rep)
	}
}

// A ".." path or a symlink out of the root fails that resource, touches
// nothing outside, and the healthy resources beside it are applied.
func TestPathsOutOfTheRootFail(t *testing.T) {
	m := newMesh(t)
	m.enroll("web-1")
	root, _ := m.agent("web-1")
	outside := t.TempDir()
	m.must(os.MkdirAll(filepath.Join(root, "etc"), 0o755))
	m.must(os.Symlink(outside, filepath.Join(root, "etc/link")))
	// Signed with the controller's own key: the agent must hold the line
	// even against a declaration that verifies.
	d := declaration.Declaration{Mesh: m.h.Mesh, Node: "web-1", Sequence: 1, ComposedAt: time.Now(),
		Resources: []compose.Resource{
			{Path: "/etc/../../escape", Kind: "file", Mode: "0644", Content: str("x"), Module: "m"},
			{Path: "/etc/link/pwned", Kind: "file", Mode: "0644", Content: str("x"), Module: "m"},
			{Path: "/etc/ok", Kind: "file", Mode: "0644", Content: str("fine\n"), Module: "m"},
		}}
	ev := sealedEvent(t, m.h.Key, d)
	m.publish("web-1", ev)
	rep := m.report("web-1", ev.Digest)
	if rep.Outcome != "failed" || len(rep.Failed) != 2 {
		t.Fatalf("report: %+v", rep)
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Fatalf("something was written outside the root: %v", entries)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(root), "escape")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a .. path escaped: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(root, "etc/ok")); err != nil || string(b) != "fine\n" {
		t.Fatalf("the healthy resource beside them: %q %v", b, err)
	}
}

// Unassigning everything sends an empty declaration: the agent removes what
// the mesh created and keeps what it adopted.
func TestEmptyDeclarationRemovesOnlyWhatTheMeshCreated(t *testing.T) {
	m := newMesh(t)
	m.enroll("app-1", "linux")
	m.enroll("db-1", "linux")
	root, _ := m.agent("app-1")
	m.must(os.MkdirAll(filepath.Join(root, "etc/app"), 0o755))
	m.must(os.WriteFile(filepath.Join(root, "etc/app/README"), []byte("mine, from before\n"), 0o644))
	m.register("postgres.json")
	m.register("app.json")
	m.assign("db-1", "postgres", map[string]string{"password": "x"})
	m.assign("app-1", "app", nil)
	s := m.push("app-1").Sent[0]
	m.report("app-1", s.Digest)
	if b, _ := os.ReadFile(filepath.Join(root, "etc/app/README")); strings.Contains(string(b), "mine") {
		t.Fatal("the adopted file was not brought to what was declared")
	}
	_, err := m.h.Unassign(m.ctx, commands.UnassignRequest{CommandID: commands.NewCommandID(), Node: "app-1", Module: "app"})
	m.must(err)
	s = m.push("app-1").Sent[0]
	if s.Resources != 0 {
		t.Fatalf("not an empty declaration: %+v", s)
	}
	if rep := m.report("app-1", s.Digest); rep.Outcome != "applied" {
		t.Fatalf("empty declaration: %+v", rep)
	}
	if _, err := os.Stat(filepath.Join(root, "etc/app/app.conf")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a file the mesh created was left: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, "etc/app/README")); err != nil {
		t.Fatalf("the adopted file was removed: %v", err)
	}
}

// Two pushes racing for the same nodes give strictly rising sequences, and
// each node ends on the last one.
func TestRacingPushesGiveRisingSequences(t *testing.T) {
	m := newMesh(t)
	nodes := []string{"n1", "n2", "n3"}
	agents := map[string]func(){}
	for _, n := range nodes {
		m.enroll(n)
		_, agents[n] = m.agent(n)
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 3 {
				if _, err := m.h.Push(m.ctx, commands.PushRequest{CommandID: commands.NewCommandID()}); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	for _, n := range nodes {
		var seqs []uint64
		m.must(m.h.Store.Read(m.ctx, storeRead(n), func(msg storeMsg) error {
			_, ev, err := events.Decode(msg.Data)
			if err == nil {
				seqs = append(seqs, ev.(events.DeclarationSent).Sequence)
			}
			return err
		}))
		for i := range seqs {
			if seqs[i] != uint64(i+1) {
				t.Fatalf("%s's sequences in the log: %v, want 1, 2, 3, ... without gaps or repeats", n, seqs)
			}
		}
		row, _, _ := m.h.Proj.Node(n)
		if rep := m.report(n, row.LastSent.Digest); rep.Sequence != uint64(len(seqs)) || rep.Outcome != "applied" {
			t.Fatalf("%s ended on %+v, want the last sequence %d applied", n, rep, len(seqs))
		}
	}
}

// An agent offline through several pushes applies only the latest when it
// returns; restarted, it does not apply the same sequence twice.
func TestOfflineAgentAppliesOnlyTheLatest(t *testing.T) {
	m := newMesh(t)
	m.enroll("web-1")
	root := filepath.Join(t.TempDir(), "root")
	for range 3 {
		m.push("web-1")
	}
	stop := m.agentAt("web-1", root)
	row, _, _ := m.h.Proj.Node("web-1")
	rep := m.report("web-1", row.LastSent.Digest)
	if rep.Sequence != 3 {
		t.Fatalf("applied %d, want only the latest, 3", rep.Sequence)
	}
	stop()
	before := countReports(t, m, "web-1")
	stop = m.agentAt("web-1", root)
	defer stop()
	// A restarted agent reads from after what it applied: the next push's
	// report is the only one it makes (an agent applying 3 again would
	// report that first, since it applies in order).
	next := m.push("web-1").Sent[0]
	m.report("web-1", next.Digest)
	if after := countReports(t, m, "web-1"); after != before+1 {
		t.Fatalf("a restarted agent reported %d times for one new declaration: it applied sequence 3 again", after-before)
	}
}

// countReports counts node's reports on declarations (applied, failed,
// refused): the facts an agent reports when it starts are not about a
// declaration, and one kept from a run stopped early is sent at the next.
func countReports(t *testing.T, m *mesh, node string) int {
	n := 0
	m.must(m.h.Store.Read(m.ctx, storeReadReports(node), func(msg storeMsg) error {
		if !strings.HasSuffix(msg.Subject, ".NodeFactsReported") && !strings.HasSuffix(msg.Subject, ".ReportKeyRecorded") {
			n++
		}
		return nil
	}))
	return n
}

func TestJoinStringRoundTrips(t *testing.T) {
	kp, _ := nkeys.CreateAccount()
	pub, _ := kp.PublicKey()
	j := agent.Join{Mesh: "mesh", Bus: "nats://127.0.0.1:4222", Node: "web-1", Key: pub}
	got, err := agent.ParseJoin(j.String())
	if err != nil || got != j {
		t.Fatalf("%+v %v", got, err)
	}
	for _, bad := range []string{"", "meshjoin1.!!!", j.String()[:20], strings.Replace(j.String(), "meshjoin1.", "x", 1)} {
		if _, err := agent.ParseJoin(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	b, _ := json.Marshal(agent.Join{Mesh: "m", Bus: "b", Node: "web-1", Key: "not-a-key"})
	_ = b
}
