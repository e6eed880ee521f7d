package agent_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshctl/mesh/agent"
	"github.com/meshctl/mesh/agent/agenttest"
	"github.com/meshctl/mesh/compose"
	"github.com/meshctl/mesh/declaration"
	"github.com/meshctl/mesh/embedded/embeddedtest"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/wire"
	"github.com/nats-io/nkeys"
)

// mesh is agenttest's whole mesh, with this package's own helpers on it.
type mesh struct{ *agenttest.Mesh }

func newMesh(t *testing.T) *mesh { return &mesh{agenttest.New(t)} }

// settle is embeddedtest.Settle: how long a test waits for agents and the fold.
const settle = embeddedtest.Settle

func str(s string) *string { return &s }

// dbAndApp enrols db-1 and app-1, each with its agent, and registers the
// example provider (postgres) and its consumer (app): where the tests of
// what crosses from a provider to a consumer start.
func (m *mesh) dbAndApp() (dbRoot, appRoot string, stopApp func()) {
	m.T.Helper()
	m.Enroll("db-1", "linux")
	m.Enroll("app-1", "linux")
	dbRoot, _ = m.Agent("db-1")
	appRoot, stopApp = m.Agent("app-1")
	m.Register("postgres.json")
	m.Register("app.json")
	return dbRoot, appRoot, stopApp
}

func TestPushAppliesWithTheProvidersAddress(t *testing.T) {
	t.Parallel()
	m := newMesh(t)
	dbRoot, appRoot, _ := m.dbAndApp()
	m.Assign("db-1", "postgres", map[string]string{"password": "s3cret", "port": "6543"})
	m.Assign("app-1", "app", nil)
	r := m.Push("")
	if len(r.Sent) != 2 || len(r.Unsent) != 0 {
		t.Fatalf("push: %+v", r)
	}
	for _, s := range r.Sent {
		if rep := m.Report(s.Node, s.Digest); rep.Outcome != "applied" {
			t.Fatalf("%s: %+v", s.Node, rep)
		}
	}
	// Rule 4: "is it current?" compares the content digest last sent with
	// the content that would be sent now, which is what plan calls its digest.
	plan, err := m.H.Push.Plan(m.Ctx, wire.NameRequest{Name: "app-1"})
	m.Must(err)
	row, _, _ := m.H.Core.Proj.Node("app-1")
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
	t.Parallel()
	m := newMesh(t)
	m.Enroll("web-1")
	root, _ := m.Agent("web-1")
	forger, _ := nkeys.CreateAccount()
	d := declaration.Declaration{Mesh: m.H.Core.Mesh, Node: "web-1", Sequence: 99, ComposedAt: time.Now(),
		Resources: []compose.Resource{{Path: "/etc/evil", Kind: "file", Mode: "0644", Content: str("owned\n"), Module: "x"}}}
	ev := agenttest.Sealed(t, forger, d)
	m.Publish("web-1", ev)
	rep := m.Report("web-1", ev.Digest)
	if rep.Outcome != "refused" || !strings.Contains(rep.Reason, "signature does not verify") {
		t.Fatalf("forged: %+v", rep)
	}
	if _, err := os.Stat(filepath.Join(root, "etc/evil")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a forged declaration wrote to the root: %v", err)
	}
}

// A replayed older declaration is refused; so is another node's.
func TestReplayAndOtherNodesDeclarationsAreRefused(t *testing.T) {
	t.Parallel()
	m := newMesh(t)
	m.Enroll("web-1")
	m.Enroll("web-2")
	m.Agent("web-1")
	first := m.Push("web-1").Sent[0]
	m.Report("web-1", first.Digest)
	second := m.Push("web-1").Sent[0]
	m.Report("web-1", second.Digest)

	// The first declaration's event, published again verbatim.
	old, err := m.H.Core.Store.Get(m.Ctx, first.StreamSeq)
	m.Must(err)
	_, ev, _ := events.Decode(old.Data)
	m.Publish("web-1", ev.(events.DeclarationSent))
	rep := m.ReportWhere("web-1", first.Digest, "refused")
	if rep.Outcome != "refused" || !strings.Contains(rep.Reason, "replay") || rep.Highest != second.Sequence {
		t.Fatalf("replay: %+v", rep)
	}
	// The refusal is in its history; it says nothing of what the node was
	// last sent, which it still holds: a replay does not change its state.
	if n, _, _ := m.H.Core.Proj.Node("web-1"); n.LastReport == nil || n.LastReport.Digest != second.Digest || n.LastReport.Outcome != "applied" {
		t.Fatalf("a replayed declaration changed web-1's report on its last send: %+v", n.LastReport)
	}

	// web-2's declaration, correctly signed, on web-1's subject.
	other := m.Push("web-2").Sent[0]
	msg, err := m.H.Core.Store.Get(m.Ctx, other.StreamSeq)
	m.Must(err)
	_, ev, _ = events.Decode(msg.Data)
	m.Publish("web-1", ev.(events.DeclarationSent))
	rep = m.Report("web-1", other.Digest)
	if rep.Outcome != "refused" || !strings.Contains(rep.Reason, "another node") {
		t.Fatalf("another node's declaration: %+v", rep)
	}
}

// A ".." path or a symlink out of the root fails that resource, touches
// nothing outside, and the healthy resources beside it are applied.
func TestPathsOutOfTheRootFail(t *testing.T) {
	t.Parallel()
	m := newMesh(t)
	m.Enroll("web-1")
	root, _ := m.Agent("web-1")
	outside := t.TempDir()
	m.Must(os.MkdirAll(filepath.Join(root, "etc"), 0o755))
	m.Must(os.Symlink(outside, filepath.Join(root, "etc/link")))
	// Signed with the controller's own key: the agent must hold the line
	// even against a declaration that verifies.
	d := declaration.Declaration{Mesh: m.H.Core.Mesh, Node: "web-1", Sequence: 1, ComposedAt: time.Now(),
		Resources: []compose.Resource{
			{Path: "/etc/../../escape", Kind: "file", Mode: "0644", Content: str("x"), Module: "m"},
			{Path: "/etc/link/pwned", Kind: "file", Mode: "0644", Content: str("x"), Module: "m"},
			{Path: "/etc/ok", Kind: "file", Mode: "0644", Content: str("fine\n"), Module: "m"},
		}}
	ev := agenttest.Sealed(t, m.H.Core.Key, d)
	m.Publish("web-1", ev)
	rep := m.Report("web-1", ev.Digest)
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
	t.Parallel()
	m := newMesh(t)
	m.Enroll("app-1", "linux")
	m.Enroll("db-1", "linux")
	root, _ := m.Agent("app-1")
	m.Must(os.MkdirAll(filepath.Join(root, "etc/app"), 0o755))
	m.Must(os.WriteFile(filepath.Join(root, "etc/app/README"), []byte("mine, from before\n"), 0o644))
	m.Register("postgres.json")
	m.Register("app.json")
	m.Assign("db-1", "postgres", map[string]string{"password": "x"})
	m.Assign("app-1", "app", nil)
	s := m.Push("app-1").Sent[0]
	m.Report("app-1", s.Digest)
	if b, _ := os.ReadFile(filepath.Join(root, "etc/app/README")); strings.Contains(string(b), "mine") {
		t.Fatal("the adopted file was not brought to what was declared")
	}
	_, err := m.H.Nodes.Unassign(m.Ctx, wire.UnassignRequest{CommandID: wire.NewCommandID(), Node: "app-1", Module: "app"})
	m.Must(err)
	s = m.Push("app-1").Sent[0]
	if s.Resources != 0 {
		t.Fatalf("not an empty declaration: %+v", s)
	}
	if rep := m.Report("app-1", s.Digest); rep.Outcome != "applied" {
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
	t.Parallel()
	m := newMesh(t)
	nodes := []string{"n1", "n2", "n3"}
	agents := map[string]func(){}
	for _, n := range nodes {
		m.Enroll(n)
		_, agents[n] = m.Agent(n)
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 3 {
				if _, err := m.H.Push.Push(m.Ctx, wire.PushRequest{CommandID: wire.NewCommandID()}); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	for _, n := range nodes {
		var seqs []uint64
		m.Must(m.H.Core.Store.Read(m.Ctx, storeRead(n), func(msg storeMsg) error {
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
		row, _, _ := m.H.Core.Proj.Node(n)
		if rep := m.Report(n, row.LastSent.Digest); rep.Sequence != uint64(len(seqs)) || rep.Outcome != "applied" {
			t.Fatalf("%s ended on %+v, want the last sequence %d applied", n, rep, len(seqs))
		}
	}
}

// An agent offline through several pushes applies only the latest when it
// returns; restarted, it does not apply the same sequence twice.
func TestOfflineAgentAppliesOnlyTheLatest(t *testing.T) {
	t.Parallel()
	m := newMesh(t)
	m.Enroll("web-1")
	root := filepath.Join(t.TempDir(), "root")
	for range 3 {
		m.Push("web-1")
	}
	stop := m.AgentAt("web-1", root)
	row, _, _ := m.H.Core.Proj.Node("web-1")
	rep := m.Report("web-1", row.LastSent.Digest)
	if rep.Sequence != 3 {
		t.Fatalf("applied %d, want only the latest, 3", rep.Sequence)
	}
	stop()
	before := countReports(t, m, "web-1")
	stop = m.AgentAt("web-1", root)
	defer stop()
	// A restarted agent reads from after what it applied: the next push's
	// report is the only one it makes (an agent applying 3 again would
	// report that first, since it applies in order).
	next := m.Push("web-1").Sent[0]
	m.Report("web-1", next.Digest)
	if after := countReports(t, m, "web-1"); after != before+1 {
		t.Fatalf("a restarted agent reported %d times for one new declaration: it applied sequence 3 again", after-before)
	}
}

// countReports counts node's reports on declarations (applied, failed,
// refused): the facts an agent reports when it starts are not about a
// declaration, and one kept from a run stopped early is sent at the next.
func countReports(t *testing.T, m *mesh, node string) int {
	n := 0
	m.Must(m.H.Core.Store.Read(m.Ctx, storeReadReports(node), func(msg storeMsg) error {
		if !strings.HasSuffix(msg.Subject, ".NodeFactsReported") && !strings.HasSuffix(msg.Subject, ".ReportKeyRecorded") {
			n++
		}
		return nil
	}))
	return n
}

func TestJoinStringRoundTrips(t *testing.T) {
	t.Parallel()
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
