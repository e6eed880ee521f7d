package commands_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshctl/mesh/agent"
	"github.com/meshctl/mesh/busauth"
	"github.com/meshctl/mesh/client"
	"github.com/meshctl/mesh/commands"
	"github.com/meshctl/mesh/compose"
	"github.com/meshctl/mesh/declaration"
	"github.com/meshctl/mesh/embedded"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/projections"
	"github.com/meshctl/mesh/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
)

// trustMesh is a controller on a closed bus (mesh up's) or an open one (a
// cluster left open), which a test can restart, with one victim's agent.
type trustMesh struct {
	t      *testing.T
	ctx    context.Context
	closed bool
	srv    *embedded.Server
	keys   busauth.BusKeys
	nc     *nats.Conn
	home   string
	ctrl   *commands.Controller
	h      *commands.Controller
	// deaf starts the next controller with liveness off: it then writes
	// nothing of its own, for a test that lines up event numbers.
	deaf bool
}

func newTrustMesh(t *testing.T, closed bool) *trustMesh {
	t.Helper()
	m := &trustMesh{t: t, ctx: context.Background(), closed: closed, home: t.TempDir()}
	o := embedded.Options{Dir: t.TempDir(), Port: -1}
	var opts []nats.Option
	if closed {
		var err error
		if m.keys, err = busauth.NewBusKeys(); err != nil {
			t.Fatal(err)
		}
		o.Auth = embedded.AuthOf(m.keys.Public())
		opts = append(opts, m.keys.ControllerOption())
	}
	srv, err := embedded.Start(m.ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	m.srv = srv
	if m.nc, err = srv.Connect(opts...); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.nc.Close)
	m.start()
	return m
}

// start starts (or restarts) the controller on the same home and bus.
func (m *trustMesh) start() {
	m.t.Helper()
	if m.ctrl != nil {
		m.ctrl.Close()
	}
	c := commands.ControllerConfig{Home: m.home}
	if m.deaf {
		c.UnreachableAfter = -1
	}
	if m.closed {
		c.Callout, c.Cut = m.keys.Issuer, m.srv.CutUsers
	}
	ctrl, err := commands.StartController(m.ctx, m.nc, c)
	if err != nil {
		m.t.Fatalf("the controller's start: %v", err)
	}
	m.t.Cleanup(func() { ctrl.Close() })
	m.ctrl, m.h = ctrl, ctrl
}

func (m *trustMesh) must(err error) {
	m.t.Helper()
	if err != nil {
		m.t.Fatal(err)
	}
}

func (m *trustMesh) join(node string) agent.Join {
	m.t.Helper()
	// A node enrolled before nodes made their own keys: the path these
	// tests pin (their seeds derive from the controller key); the nodes
	// that made theirs are TestAnOperatorsHomeCannotMakeANodesWord's.
	id, err := m.h.Access.LegacyIdentity(node)
	m.must(err)
	return agent.Join{Mesh: id.Mesh, Bus: m.srv.ClientURL(), Node: node, Key: id.Key, Seed: id.Seed}
}

// connect connects as node would: with its join string on a closed bus,
// with nothing on an open one.
func (m *trustMesh) connect(node string, v *violations) *nats.Conn {
	m.t.Helper()
	opts, err := m.join(node).Options()
	m.must(err)
	if !m.closed {
		opts = nil
	}
	if v != nil {
		opts = append(opts, nats.ErrorHandler(v.handler))
	}
	nc, err := nats.Connect(m.srv.ClientURL(), opts...)
	m.must(err)
	m.t.Cleanup(nc.Close)
	return nc
}

// runAgent runs node's agent under root until the test ends.
func (m *trustMesh) runAgent(node, root string) {
	m.t.Helper()
	a, err := agent.Open(m.ctx, m.connect(node, nil), agent.Config{Join: m.join(node), Root: root})
	m.must(err)
	ctx, cancel := context.WithCancel(m.ctx)
	done := make(chan struct{})
	go func() { defer close(done); a.Run(ctx) }()
	m.t.Cleanup(func() { cancel(); <-done; a.Close() })
}

// fence appends an event of the controller's and waits for its fold: every
// message published before it has been folded too.
func (m *trustMesh) fence() {
	m.t.Helper()
	r, err := m.h.Nodes.Enroll(m.ctx, wire.EnrollRequest{CommandID: wire.NewCommandID(), Name: "fence-" + strings.ToLower(wire.NewCommandID()[:8])})
	m.must(err)
	m.must(m.h.Core.Proj.WaitFor(m.ctx, r.Seq))
}

// settle waits until the read models have folded everything the stream
// holds now (what was acknowledged to its writer is in it).
func (m *trustMesh) settle() {
	m.t.Helper()
	st, err := m.h.Core.Store.State(m.ctx)
	m.must(err)
	m.must(m.h.Core.Proj.WaitFor(m.ctx, st.LastSeq))
}

// envelope is ev as a mesh event on agg, as anyone could encode it.
func envelope(t *testing.T, agg events.AggregateID, ev events.Event) []byte {
	t.Helper()
	b, err := events.Encode(agg, "forged-"+wire.NewCommandID(), "", 0, time.Now(), ev)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// forgery is one message an attacker holding app-1's join string sends.
type forgery struct {
	what, subject, reply string
	data                 []byte
	mac                  bool // with app-1's report MAC, which its join string gives
	// landsClosed: the closed bus lets app-1 publish it (the fold must
	// stop it); otherwise the bus refuses it and it never lands.
	landsClosed bool
	reason      string // the foreign reason, when it lands
	refusedAs   string // what the closed bus says refusing it, when not the subject
}

// Every forgery of issue 11, by a real node identity: on a closed bus, where
// the bus and the fold both stand, and on an open one, where only the fold
// does. None changes a file, a state, a standing or a retirement; each that
// lands is a foreign message with its reason; the mesh keeps serving, and
// restarts, verifies and rebuilds over them.
func TestForgeriesChangeNothing(t *testing.T) {
	t.Parallel() // its own bus; beside the others
	for _, closed := range []bool{true, false} {
		name := "open bus"
		if closed {
			name = "closed bus"
		}
		t.Run(name, func(t *testing.T) { forgeriesChangeNothing(t, closed) })
	}
}

func forgeriesChangeNothing(t *testing.T, closed bool) {
	m := newTrustMesh(t, closed)
	ctx := m.ctx
	for _, n := range []string{"app-1", "db-1", "ghost-1"} {
		_, err := m.h.Nodes.Enroll(ctx, wire.EnrollRequest{CommandID: wire.NewCommandID(), Name: n, Capabilities: []string{"linux"}})
		m.must(err)
	}
	manifest, err := os.ReadFile("../examples/postgres.json")
	m.must(err)
	_, err = m.h.Modules.RegisterModule(ctx, wire.RegisterRequest{CommandID: wire.NewCommandID(), File: "postgres.json", Manifest: string(manifest)})
	m.must(err)
	_, err = m.h.Nodes.Assign(ctx, wire.AssignRequest{CommandID: wire.NewCommandID(), Node: "db-1", Module: "postgres", Settings: map[string]string{"password": "x"}})
	m.must(err)
	root := filepath.Join(t.TempDir(), "db-1")
	m.runAgent("db-1", root)
	pushed, err := m.h.Push.Push(ctx, wire.PushRequest{CommandID: wire.NewCommandID()})
	m.must(err)
	var dbSent, ghostSent wire.PushedNode
	for _, p := range pushed.Sent {
		switch p.Node {
		case "db-1":
			dbSent = p
		case "ghost-1":
			ghostSent = p
		}
	}
	m.must(client.WaitReport(ctx, m.h.Core.Store, m.h.Status, "db-1", dbSent.Digest, dbSent.StreamSeq, reportWait))
	m.fence()
	before, err := m.h.Status.Status(ctx, wire.StatusRequest{})
	m.must(err)

	// What app-1's join string gives an attacker: its MAC key.
	bus, _ := nkeys.FromSeed([]byte(m.join("app-1").Seed))
	mac, _ := declaration.ReportMACKey(bus)
	stranger, _ := nkeys.CreateUser()
	strangerSigner, _ := declaration.NewSigner(stranger)
	evil := `{"module":"evil","requires":[],"provides":[],"consumes":[],"settings":{},"resources":[{"kind":"file","path":"/etc/evil","mode":"0644","content":"owned\n"}]}`
	evilBuild := compose.Digest([]byte(evil))
	forger, _ := nkeys.CreateAccount()
	forged, err := declaration.Seal(forger, declaration.Declaration{Mesh: m.h.Core.Mesh, Node: "db-1", Sequence: 99, ComposedAt: time.Now(),
		Resources: []compose.Resource{{Path: "/etc/evil", Kind: "file", Mode: "0644", Content: ptr("owned\n"), Module: "evil"}}})
	m.must(err)
	node, module := events.NodeAggregate, events.ModuleAggregate
	fs := []forgery{
		{what: "registers a module", subject: "mesh.ev.module.evil.ModuleRegistered",
			data: envelope(t, module("evil"), events.ModuleRegistered{Module: "evil", Build: evilBuild, Manifest: []byte(evil)}), reason: "MAC of this mesh's controller"},
		{what: "assigns it to another node", subject: "mesh.ev.node.db-1.ModuleAssigned",
			data: envelope(t, node("db-1"), events.ModuleAssigned{Node: "db-1", Module: "evil", Build: evilBuild}), reason: "MAC of this mesh's controller"},
		{what: "registers under its own report prefix", subject: "mesh.rp.app-1.ModuleRegistered", mac: true,
			data: envelope(t, module("evil"), events.ModuleRegistered{Module: "evil", Build: evilBuild, Manifest: []byte(evil)}), reason: "only the controller writes it"},
		{what: "retires another node", subject: "mesh.ev.node.db-1.NodeRetired",
			data: envelope(t, node("db-1"), events.NodeRetired{Name: "db-1"}), reason: "MAC of this mesh's controller"},
		{what: "reports for a node with no agent", subject: "mesh.rp.ghost-1.DeclarationApplied",
			data: envelope(t, node("ghost-1"), events.DeclarationApplied{Node: "ghost-1", Sequence: ghostSent.Sequence, Digest: ghostSent.Digest}), reason: "ghost-1's MAC"},
		{what: "reports for it under its own prefix", subject: "mesh.rp.app-1.DeclarationApplied", mac: true, landsClosed: true,
			data: envelope(t, node("ghost-1"), events.DeclarationApplied{Node: "ghost-1", Sequence: ghostSent.Sequence, Digest: ghostSent.Digest}), reason: `naming "ghost-1"`},
		{what: "sets another machine's standing", subject: "mesh.rp.app-1.ProviderFailing", mac: true, landsClosed: true,
			data: envelope(t, node("db-1"), events.ProviderFailing{Provider: "postgres", Machine: "db-1", Consumer: "app", Word: "down"}), reason: `naming "db-1"`},
		{what: "clears it", subject: "mesh.rp.app-1.ProviderRecovered", mac: true, landsClosed: true,
			data: envelope(t, node("db-1"), events.ProviderRecovered{Provider: "postgres", Machine: "db-1", Consumer: "app"}), reason: `naming "db-1"`},
		{what: "sends garbage", subject: "mesh.rp.app-1.DeclarationApplied", mac: true, landsClosed: true,
			data: []byte("\x00garbage{"), reason: "not a mesh event"},
		{what: "sends an unknown type", subject: "mesh.rp.app-1.DeclarationApplied", mac: true, landsClosed: true,
			data: []byte(`{"id":"x","type":"Teleported","version":1,"aggregate":{"kind":"node","id":"app-1"},"data":{}}`), reason: "not a mesh event"},
		{what: "aims an acknowledgement at the controller key's record", subject: "mesh.rp.app-1.DeclarationFailed", mac: true, landsClosed: true,
			reply: "mesh.ev.controller.keys.ControllerKeyRecorded", data: []byte("{}"), reason: "not a mesh event"},
		{what: "refuses claiming sequence 2^64-2, not signed by its agent", subject: "mesh.rp.app-1.DeclarationRefused", mac: true, landsClosed: true,
			data: envelope(t, node("app-1"), events.DeclarationRefused{Node: "app-1", Sequence: 1, Highest: 1<<64 - 2}), reason: "no report key"},
		{what: "sends a declaration signed by another key", subject: "mesh.ev.node.db-1.DeclarationSent",
			data: envelope(t, node("db-1"), events.DeclarationSent{Node: "db-1", Sequence: 99, Digest: forged.Digest(), By: "push",
				Declaration: forged.Bytes, Signature: forged.Signature, Key: forged.Key}), reason: "MAC of this mesh's controller"},
		// Last: the closed bus closes the connection of a node that tries it.
		{what: "reports 70 KB", subject: "mesh.rp.app-1.DeclarationFailed", mac: true,
			data:   envelope(t, node("app-1"), events.DeclarationFailed{Node: "app-1", Failed: []events.ResourceFailure{{Path: "/a", Reason: strings.Repeat("x", 70<<10)}}}),
			reason: "over the 65536 bytes a report may be", refusedAs: "Maximum Payload"},
	}
	var v violations
	nc := m.connect("app-1", &v)
	wantForeign := 0
	for _, f := range fs {
		msg := nats.NewMsg(f.subject)
		msg.Data, msg.Reply = f.data, f.reply
		if f.mac {
			msg.Header.Set(events.MACHeader, declaration.MAC(mac, f.subject, f.data))
			msg.Header.Set(events.SignerHeader, strangerSigner.PublicKey())
			msg.Header.Set(events.SignatureHeader, strangerSigner.Sign(f.data))
		}
		err := nc.PublishMsg(msg)
		if closed && f.refusedAs != "" {
			// The bus told the client its limit: the client refuses, and a
			// client that sent anyway would be cut off by the server.
			if err == nil {
				nc.Flush()
				err = nc.LastError()
			}
			if err == nil || !strings.Contains(strings.ToLower(err.Error()), strings.ToLower(f.refusedAs)) {
				t.Fatalf("%s: the closed bus said %v", f.what, err)
			}
			continue
		}
		m.must(err)
		m.must(nc.Flush())
		if closed && !f.landsClosed {
			v.waitFor(t, f.subject)
			continue
		}
		wantForeign++
		if f.reply != "" {
			wantForeign++ // the acknowledgement the stream stored under the reply
		}
	}
	m.fence()

	// Nothing changed: no file, no state, no standing, no retirement, no module.
	if _, err := os.Stat(filepath.Join(root, "etc/evil")); !os.IsNotExist(err) {
		t.Fatalf("a forgery wrote a file on db-1: %v", err)
	}
	after, err := m.h.Status.Status(ctx, wire.StatusRequest{})
	m.must(err)
	now := map[string]wire.NodeStatus{}
	for _, n := range after.Nodes {
		now[n.Name] = n
	}
	for _, n := range before.Nodes {
		if a := now[n.Name]; a.State != n.State || a.Digest != n.Digest {
			t.Errorf("%s went from %s to %s", n.Name, n.State, a.State)
		}
	}
	if len(after.Standings) != 0 {
		t.Errorf("a forged standing stands: %+v", after.Standings)
	}
	if row, _, _ := m.h.Core.Proj.Node("db-1"); row.Retired {
		t.Error("db-1 was retired by a forgery")
	}
	if mods, err := m.h.Modules.ListModules(ctx, wire.Empty{}); err != nil || len(mods.Modules) != 1 {
		t.Errorf("the catalogue: %+v %v", mods, err)
	}
	// Each that landed is foreign, with its reason.
	list, err := m.h.Access.ListForeign(ctx, wire.Empty{})
	m.must(err)
	if len(list.Foreign) != wantForeign || list.Open != wantForeign {
		t.Fatalf("%d foreign messages (%d open), want %d: %+v", len(list.Foreign), list.Open, wantForeign, list.Foreign)
	}
	for _, f := range fs {
		if closed && !f.landsClosed {
			continue
		}
		if !containsForeign(list.Foreign, f.subject, f.reason) {
			t.Errorf("%s: no foreign message on %s saying %q: %+v", f.what, f.subject, f.reason, list.Foreign)
		}
	}
	// Status names them and is not well until they are acknowledged.
	if after.Well || !strings.Contains(strings.Join(after.Causes, "\n"), "foreign message(s) not acknowledged") {
		t.Fatalf("status over open foreign messages: well %v, causes %v", after.Well, after.Causes)
	}
	// A routine push sends nothing of the attacker's.
	if _, err := m.h.Push.Push(ctx, wire.PushRequest{CommandID: wire.NewCommandID(), Behind: true}); err != nil {
		t.Fatal(err)
	}
	if row, _, _ := m.h.Core.Proj.Node("db-1"); row.LastSent == nil || row.LastSent.Sequence != dbSent.Sequence {
		t.Fatalf("db-1 was sent something after the forgeries: %+v", row.LastSent)
	}

	// The mesh restarts over them, and a fresh fold equals the live one.
	m.start()
	v2, err := m.h.Status.VerifyProjections(ctx, wire.FoldRequest{})
	if err != nil || v2.Diff != "" {
		t.Fatalf("verify over foreign messages: %v\n%s", err, v2.Diff)
	}
	if _, err := m.h.Status.RebuildProjections(ctx, wire.FoldRequest{}); err != nil {
		t.Fatalf("rebuild over foreign messages: %v", err)
	}
	if l, _ := m.h.Access.ListForeign(ctx, wire.Empty{}); len(l.Foreign) != wantForeign {
		t.Fatalf("after a restart and a rebuild: %d foreign, want %d", len(l.Foreign), wantForeign)
	}

	// Acknowledged, they stop counting against the mesh, and stay listed.
	var seqs []uint64
	for _, f := range list.Foreign {
		seqs = append(seqs, f.Seq)
	}
	if _, err := m.h.Access.AckForeign(ctx, wire.AckRequest{CommandID: wire.NewCommandID(), Seqs: []uint64{1}}); err == nil {
		t.Fatal("acknowledging event 1, which is no foreign message, was accepted")
	}
	ack, err := m.h.Access.AckForeign(ctx, wire.AckRequest{CommandID: wire.NewCommandID(), Seqs: seqs})
	m.must(err)
	if len(ack.Acknowledged) != wantForeign {
		t.Fatalf("acknowledged %+v", ack)
	}
	s, err := m.h.Status.Status(ctx, wire.StatusRequest{})
	m.must(err)
	if strings.Contains(strings.Join(s.Causes, "\n"), "foreign") {
		t.Fatalf("status after the acknowledgement: %v", s.Causes)
	}
	if l, _ := m.h.Access.ListForeign(ctx, wire.Empty{}); len(l.Foreign) != wantForeign || l.Open != 0 {
		t.Fatalf("foreign list after the acknowledgement: %+v", l)
	}
	// db-1 can still be changed and sent to: the forgeries on its subjects
	// moved the stream's last sequence for it, and its row followed (else
	// every write to db-1 would conflict for good).
	_, err = m.h.Nodes.Assign(ctx, wire.AssignRequest{CommandID: wire.NewCommandID(), Node: "db-1", Module: "postgres", Settings: map[string]string{"password": "y"}})
	m.must(err)
	if r, err := m.h.Push.Push(ctx, wire.PushRequest{CommandID: wire.NewCommandID(), Node: "db-1"}); err != nil || len(r.Sent) != 1 {
		t.Fatalf("a push to db-1 after the forgeries: %+v %v", r, err)
	}
}

func containsForeign(list []projections.ForeignMessage, subject, reason string) bool {
	for _, f := range list {
		if f.Subject == subject && strings.Contains(f.Reason, reason) {
			return true
		}
	}
	return false
}

func ptr(s string) *string { return &s }
