// Package agenttest is a whole mesh in one test process: a real embedded
// bus, a real controller with its Pebble read models, and real agents each
// on its own connection and root. The tests of what agents make visible
// (status, history, audit, push --wait) sit beside the commands that show
// it and use this harness, as the agent's own tests do; a fake of any part
// would hide exactly the bugs those tests exist to catch.
package agenttest

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/meshctl/mesh/agent"
	"github.com/meshctl/mesh/artifact"
	"github.com/meshctl/mesh/commands"
	"github.com/meshctl/mesh/declaration"
	"github.com/meshctl/mesh/embedded"
	"github.com/meshctl/mesh/embedded/embeddedtest"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/projections"
	"github.com/meshctl/mesh/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"
)

// Mesh is a controller and agents on one embedded server, in this process.
type Mesh struct {
	T    *testing.T
	Srv  *embedded.Server
	Ctrl *commands.Controller
	H    *commands.Controller
	Ctx  context.Context
	Home string // the controller's home: its key and read models
}

// New starts a bus and a controller for t; both stop when t ends.
func New(t *testing.T) *Mesh {
	t.Helper()
	return NewWith(t, func(*commands.ControllerConfig) {})
}

// NewWith is New with the controller's configuration changed by set (its
// clock, its bounds, for a test).
func NewWith(t *testing.T, set func(*commands.ControllerConfig)) *Mesh {
	t.Helper()
	srv := embeddedtest.Server(t)
	home := t.TempDir()
	cfg := commands.ControllerConfig{Home: home}
	set(&cfg)
	ctrl, err := commands.StartController(context.Background(), embeddedtest.Conn(t, srv), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ctrl.Close() })
	return &Mesh{T: t, Srv: srv, Ctrl: ctrl, H: ctrl, Ctx: context.Background(), Home: home}
}

// Must fails the test on err.
func (m *Mesh) Must(err error) {
	m.T.Helper()
	if err != nil {
		m.T.Fatal(err)
	}
}

// Enroll enrols node with caps.
func (m *Mesh) Enroll(name string, caps ...string) {
	m.T.Helper()
	_, err := m.H.Nodes.Enroll(m.Ctx, wire.EnrollRequest{CommandID: wire.NewCommandID(), Name: name, Capabilities: caps})
	m.Must(err)
}

// Register registers the example manifest file (examples/ at the
// repository's top, found above the test's package however deep it sits).
func (m *Mesh) Register(file string) {
	m.T.Helper()
	data, err := os.ReadFile(Example(m.T, file))
	m.Must(err)
	_, err = m.H.Modules.RegisterModule(m.Ctx, wire.RegisterRequest{CommandID: wire.NewCommandID(), File: file, Manifest: string(data)})
	m.Must(err)
}

// WriteModule registers the manifest doc.
func (m *Mesh) WriteModule(doc string) {
	m.T.Helper()
	_, err := m.H.Modules.RegisterModule(m.Ctx, wire.RegisterRequest{CommandID: wire.NewCommandID(), File: "m.json", Manifest: doc})
	m.Must(err)
}

// Assign assigns module to node with settings.
func (m *Mesh) Assign(node, module string, settings map[string]string) {
	m.T.Helper()
	_, err := m.H.Nodes.Assign(m.Ctx, wire.AssignRequest{CommandID: wire.NewCommandID(), Node: node, Module: module, Settings: settings})
	m.Must(err)
}

// Push pushes node ("" every node).
func (m *Mesh) Push(node string) wire.PushReply {
	m.T.Helper()
	r, err := m.H.Push.Push(m.Ctx, wire.PushRequest{CommandID: wire.NewCommandID(), Node: node})
	m.Must(err)
	return r
}

// Agent starts node's agent on its own connection, with a root of its own.
func (m *Mesh) Agent(node string) (root string, stop func()) {
	m.T.Helper()
	root = filepath.Join(m.T.TempDir(), "root")
	return root, m.AgentAt(node, root)
}

// AgentAt starts node's agent on root.
func (m *Mesh) AgentAt(node, root string) func() {
	m.T.Helper()
	return m.AgentWith(node, root, func(*agent.Config) {})
}

// AgentWith starts node's agent on root with its configuration changed
// by set (the supervision's and drift check's times, for a test).
func (m *Mesh) AgentWith(node, root string, set func(*agent.Config)) func() {
	m.T.Helper()
	// Enrolled as any agent is (issue 29): a token, keys it makes.
	token, err := m.H.Access.LocalToken(m.Ctx, node)
	m.Must(err)
	j := agent.Join{Mesh: m.H.Core.Mesh, Bus: m.Srv.ClientURL(), Node: node, Key: m.H.Core.PublicKey, Token: token}
	j, err = agent.Enrol(m.Ctx, j, agent.StateDir(root, ""), func(o ...nats.Option) (*nats.Conn, error) {
		return nats.Connect(m.Srv.ClientURL(), o...)
	}, slog.New(slog.DiscardHandler))
	m.Must(err)
	return m.AgentJoined(j, root, set)
}

// LegacyAgentAt starts node's agent on root as a node enrolled before
// nodes made their own keys: with the seed derived from the controller's.
func (m *Mesh) LegacyAgentAt(node, root string) func() {
	m.T.Helper()
	id, err := m.H.Access.LegacyIdentity(node)
	m.Must(err)
	return m.AgentJoined(agent.Join{Mesh: id.Mesh, Bus: m.Srv.ClientURL(), Node: node, Key: id.Key, Seed: id.Seed}, root, func(*agent.Config) {})
}

// AgentJoined starts an agent with join j on root.
func (m *Mesh) AgentJoined(j agent.Join, root string, set func(*agent.Config)) func() {
	m.T.Helper()
	cfg := agent.Config{Join: j, Root: root}
	set(&cfg)
	a, err := agent.Open(m.Ctx, embeddedtest.Conn(m.T, m.Srv), cfg)
	m.Must(err)
	ctx, cancel := context.WithCancel(m.Ctx)
	done := make(chan struct{})
	go func() { defer close(done); a.Run(ctx) }()
	var once sync.Once
	stop := func() { once.Do(func() { cancel(); <-done; a.Close() }) }
	m.T.Cleanup(stop)
	return stop
}

// Report waits until node has reported on digest and answers its newest
// report on it, from the history index: a report on something other than
// what the node was last sent (a forged or replayed declaration) is there,
// though it does not displace the node's report on its last send.
func (m *Mesh) Report(node, digest string) projections.Report {
	m.T.Helper()
	return m.ReportWhere(node, digest, "")
}

// ReportWhere is Report, waiting for a report of that outcome ("" any).
func (m *Mesh) ReportWhere(node, digest string, outcome events.Outcome) projections.Report {
	m.T.Helper()
	outcomes := map[byte]events.Outcome{projections.HistoryApplied: events.OutcomeApplied, projections.HistoryFailed: events.OutcomeFailed, projections.HistoryRefused: events.OutcomeRefused}
	var found *projections.Report
	embeddedtest.Eventually(m.T, fmt.Sprintf("%s to report on %s", node, digest), func() bool {
		m.Must(m.H.Core.Proj.Read(func(v *projections.View) error {
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
	if n, _, _ := m.H.Core.Proj.Node(node); n.LastReport != nil && n.LastReport.StreamSeq == found.StreamSeq {
		return *n.LastReport
	}
	return *found
}

// Publish puts a DeclarationSent on node's subject with a plain client, as
// anyone who can reach the bus could.
func (m *Mesh) Publish(node string, ev events.DeclarationSent) {
	m.T.Helper()
	data, err := events.Encode(events.NodeAggregate(node), "forged-"+wire.NewCommandID(), "", 0, time.Now(), ev)
	m.Must(err)
	js, _ := jetstream.New(embeddedtest.Conn(m.T, m.Srv))
	_, err = js.Publish(m.Ctx, events.DeclarationSubject(node), data)
	m.Must(err)
}

// Status is each node's status, by name.
func (m *Mesh) Status() map[string]wire.NodeStatus {
	m.T.Helper()
	s, err := m.H.Status.Status(m.Ctx, wire.StatusRequest{})
	m.Must(err)
	out := map[string]wire.NodeStatus{}
	for _, n := range s.Nodes {
		out[n.Name] = n
	}
	return out
}

// WaitState polls status until node is in state.
func (m *Mesh) WaitState(node string, state wire.State) wire.NodeStatus {
	m.T.Helper()
	var n wire.NodeStatus
	embeddedtest.Eventually(m.T, fmt.Sprintf("%s to be %s", node, state), func() bool { n = m.Status()[node]; return n.State == state })
	return n
}

// Verified folds the whole stream afresh and fails unless it equals the
// live read models (rule 17): what a test's events built, a rebuild builds.
func (m *Mesh) Verified() {
	m.T.Helper()
	v, err := m.H.Status.VerifyProjections(m.Ctx, wire.FoldRequest{})
	if err != nil || v.Diff != "" {
		m.T.Fatalf("a fresh fold differs from the live read models: %v\n%s", err, v.Diff)
	}
}

// Sealed is d sealed with kp as the DeclarationSent that carries it: a
// declaration signed by a key of the test's choosing (the controller's, or
// a forger's).
func Sealed(t *testing.T, kp nkeys.KeyPair, d declaration.Declaration) events.DeclarationSent {
	t.Helper()
	s, err := declaration.Seal(kp, d)
	if err != nil {
		t.Fatal(err)
	}
	return events.DeclarationSent{Node: d.Node, Sequence: d.Sequence, Digest: s.Digest(), Declaration: s.Bytes, Signature: s.Signature, Key: s.Key, Proof: s.Proof}
}

// Example is the path of file in examples/ at the repository's top: the
// first directory above the test's package holding go.mod, since a test runs
// in its package's directory at any depth.
func Example(t testing.TB, file string) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, "examples", file)
		}
		up := filepath.Dir(dir)
		if up == dir {
			t.Fatalf("no go.mod above the test to find examples/%s", file)
		}
		dir = up
	}
}

// PutArtifact puts data into the mesh under name as mesh artifact put
// does (the bytes uploaded to the bucket, then recorded by the
// controller), and answers its digest.
func (m *Mesh) PutArtifact(name string, data []byte) string {
	m.T.Helper()
	digest, size, err := artifact.Hash(bytes.NewReader(data))
	m.Must(err)
	obs, err := artifact.Bucket(m.Ctx, m.H.Core.Store.JetStream())
	m.Must(err)
	_, err = obs.Put(m.Ctx, jetstream.ObjectMeta{Name: digest}, bytes.NewReader(data))
	m.Must(err)
	r, err := m.H.Artifacts.PutArtifact(m.Ctx, wire.ArtifactPutRequest{CommandID: wire.NewCommandID(), Name: name, Digest: digest, Size: size})
	m.Must(err)
	if r.Upload {
		m.T.Fatalf("the controller did not find artifact %s in the bucket", name)
	}
	return digest
}
