package commands_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshctl/mesh/busauth"
	"github.com/meshctl/mesh/embedded/embeddedtest"

	"github.com/meshctl/mesh/agent"
	"github.com/meshctl/mesh/client"
	"github.com/meshctl/mesh/commands"
	"github.com/meshctl/mesh/declaration"
	"github.com/meshctl/mesh/embedded"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/events/store"
	"github.com/meshctl/mesh/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"
)

// closedMesh is mesh up's bus: closed, its controller answering the callout.
type closedMesh struct {
	t    testing.TB
	srv  *embedded.Server
	h    *commands.Controller
	home string
}

func newClosedMesh(t testing.TB, lifetime time.Duration) *closedMesh {
	t.Helper()
	keys, err := busauth.NewBusKeys()
	if err != nil {
		t.Fatal(err)
	}
	srv, err := embedded.Start(context.Background(), embedded.Options{Dir: t.TempDir(), Port: -1, Auth: embedded.AuthOf(keys.Public())})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	nc, err := srv.Connect(keys.ControllerOption())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	home := t.TempDir()
	ctrl, err := commands.StartController(context.Background(), nc, commands.ControllerConfig{Home: home, Callout: keys.Issuer, Lifetime: lifetime})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ctrl.Close() })
	return &closedMesh{t: t, srv: srv, h: ctrl, home: home}
}

// enrollAndDeclare enrols node and sends it one declaration; its join.
func (m *closedMesh) enrollAndDeclare(node string) agent.Join {
	m.t.Helper()
	ctx := context.Background()
	c, err := m.h.Nodes.Enroll(ctx, wire.EnrollRequest{CommandID: wire.NewCommandID(), Name: node})
	if err != nil {
		m.t.Fatal(err)
	}
	if _, err := m.h.Push.Declare(ctx, wire.DeclareRequest{CommandID: wire.NewCommandID(), Node: node, File: "f.json",
		Body: `{"resources":[{"kind":"file","path":"/etc/secret","mode":"0600","content":"` + node + `'s secret"}]}`}); err != nil {
		m.t.Fatal(err)
	}
	// The legacy join (derived seed): the matrix below is of permissions,
	// which are the same for a node that made its own keys.
	id, err := m.h.Access.LegacyIdentity(c.Node.Name)
	if err != nil {
		m.t.Fatal(err)
	}
	return agent.Join{Mesh: id.Mesh, Bus: m.srv.ClientURL(), Node: node, Key: id.Key, Seed: id.Seed}
}

// violations collects the permission errors the server sends a connection.
type violations struct {
	mu   sync.Mutex
	seen []string
}

func (v *violations) handler(_ *nats.Conn, _ *nats.Subscription, err error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.seen = append(v.seen, err.Error())
}

// waitFor polls until a violation naming what has been seen.
func (v *violations) waitFor(t *testing.T, what string) {
	t.Helper()
	embeddedtest.Eventually(t, "a permissions violation for "+what, func() bool {
		v.mu.Lock()
		defer v.mu.Unlock()
		return slices.ContainsFunc(v.seen, func(s string) bool { return strings.Contains(s, what) })
	})
}

func (m *closedMesh) connectAs(j agent.Join, v *violations) (*nats.Conn, error) {
	opts, err := j.Options()
	if err != nil {
		return nil, err
	}
	if v != nil {
		opts = append(opts, nats.ErrorHandler(v.handler))
	}
	nc, err := nats.Connect(m.srv.ClientURL(), opts...)
	if err == nil {
		m.t.Cleanup(nc.Close)
	}
	return nc, err
}

// nodeSealing is what an agent of j signs and MACs its reports with.
func nodeSealing(t testing.TB, j agent.Join) store.Sealing {
	t.Helper()
	bus, err := nkeys.FromSeed([]byte(j.Seed))
	if err != nil {
		t.Fatal(err)
	}
	mac, err := declaration.ReportMACKey(bus)
	if err != nil {
		t.Fatal(err)
	}
	kp, _ := nkeys.CreateUser()
	signer, err := declaration.NewSigner(kp)
	if err != nil {
		t.Fatal(err)
	}
	return store.Sealing{Signer: signer, MAC: mac}
}

// Rules 18 and 19 on the bus: the permission matrix of docs/security.md,
// every cell, granted and refused, against a real closed bus. A node reads
// its own declarations and publishes its own reports, each type on its own
// subject, and nothing else; the operator asks the controller and reads the
// stream, and never writes it; a connection that is neither is refused.
func TestThePermissionMatrix(t *testing.T) {
	t.Parallel() // its own bus and homes; long and partly waiting: beside the others
	m := newClosedMesh(t, 0)
	ctx := context.Background()
	app := m.enrollAndDeclare("app-1")
	db := m.enrollAndDeclare("db-1")

	var v violations
	nc, err := m.connectAs(app, &v)
	if err != nil {
		t.Fatalf("app-1 connecting with its join string: %v", err)
	}
	st, _ := store.AttachNode(nc, "")
	short := func() (context.Context, context.CancelFunc) { return context.WithTimeout(ctx, 500*time.Millisecond) }

	// Granted to a node: its newest declaration, hearing its own, each of
	// its report types on its own subject.
	last, found, err := st.Last(ctx, events.DeclarationSubject("app-1"))
	if err != nil || !found || !strings.Contains(string(last.Data), "app-1") {
		t.Fatalf("app-1 reading its newest declaration: %v %v", found, err)
	}
	// Each of its declarations as the stream republishes it once stored
	// (events.StoredPrefix), heard with its place in the stream.
	told, err := nc.SubscribeSync(events.StoredSubject("app-1"))
	if err != nil || nc.Flush() != nil {
		t.Fatalf("app-1 hearing its declarations: %v", err)
	}
	if _, err := m.h.Push.Declare(ctx, wire.DeclareRequest{CommandID: wire.NewCommandID(), Node: "app-1", File: "f.json",
		Body: `{"resources":[{"kind":"file","path":"/etc/again","mode":"0600","content":"again"}]}`}); err != nil {
		t.Fatal(err)
	}
	if msg, err := told.NextMsg(embeddedtest.Settle); err != nil {
		t.Fatalf("app-1 hearing its next declaration stored: %v", err)
	} else if got, err := store.Republished(msg); err != nil || got.Subject != events.DeclarationSubject("app-1") || got.Seq <= last.Seq {
		t.Fatalf("app-1 heard %+v (%v), want its declaration stored after event %d", got, err, last.Seq)
	}
	js, _ := jetstream.New(nc)
	for _, typ := range events.ReportTypes() {
		if _, err := js.Publish(ctx, events.ReportSubject("app-1", typ), []byte("{}")); err != nil {
			t.Errorf("app-1 publishing its %s: %v", typ, err)
		}
	}

	// Asking the controller for its own files' content keys: answered
	// (here, that it names no file), never dropped by the bus.
	if resp, err := nc.Request(events.ContentKeySubject("app-1"), []byte(`{"files":[]}`), 5*time.Second); err != nil || !strings.Contains(string(resp.Data), "1 to") {
		t.Fatalf("app-1 asking for its content keys: %v", err)
	}

	// Saying it is alive, on its own liveness subject: the controller hears it.
	mac := nodeSealing(t, app).MAC
	beat := func(at time.Time) {
		t.Helper()
		subject := events.LivenessSubject("app-1")
		if err := nc.Publish(subject, declaration.Beat(mac, subject, at)); err != nil {
			t.Fatal(err)
		}
	}
	beat(time.Now())
	embeddedtest.Eventually(t, "the controller to hear app-1 alive", func() bool { return !m.h.Live.LastHeard("app-1").IsZero() })
	// A request it may make, answered onto db-1's liveness subject: the
	// bus delivers JetStream's answer there, and it is not db-1's beat.
	seen, err := m.h.Core.Store.NC().SubscribeSync(events.LivenessSubject("db-1"))
	if err == nil {
		err = m.h.Core.Store.NC().Flush()
	}
	if err == nil {
		err = nc.PublishRequest("$JS.API.DIRECT.GET."+events.Stream+"."+events.DeclarationSubject("app-1"), events.LivenessSubject("db-1"), nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	if _, err := seen.NextMsg(5 * time.Second); err != nil {
		t.Fatalf("the answer aimed at db-1's liveness subject did not arrive: %v", err)
	}
	// Heard after it on the same subscription: once app-1's next beat is
	// heard, the answer before it was weighed.
	before := m.h.Live.LastHeard("app-1")
	beat(time.Now().Add(time.Second))
	embeddedtest.Eventually(t, "app-1's next beat", func() bool { return m.h.Live.LastHeard("app-1").After(before) })
	if !m.h.Live.LastHeard("db-1").IsZero() {
		t.Fatal("an answer aimed at db-1's liveness subject was heard as db-1 alive")
	}

	// Refused to a node: each a publish the server drops with a violation.
	refusedPub := []string{
		"mesh.rp.db-1.DeclarationApplied",                                   // another node's report
		"mesh.rp.app-1.NodeEnrolled",                                        // a type that is no report, under its own prefix
		"mesh.rp.app-1.x.DeclarationApplied",                                // a deeper subject under its prefix
		"mesh.told.app-1",                                                   // a declaration as if the stream had stored it
		"mesh.told.db-1",                                                    // the same, to another node
		"mesh.ev.node.app-1.ModuleAssigned",                                 // the controller's events
		"mesh.ev.module.evil.ModuleRegistered",                              //
		"mesh.op.open.status",                                               // the controller's verbs
		"$JS.API.DIRECT.GET.MESH.mesh.ev.node.db-1.DeclarationSent",         // another's declaration
		"$JS.API.DIRECT.GET.MESH",                                           // any message by sequence
		"$JS.API.STREAM.INFO.MESH",                                          // the stream's information names every subject
		"$JS.API.CONSUMER.CREATE.MESH.c.mesh.ev.node.app-1.DeclarationSent", // any consumer, even of its own
		"$JS.API.CONSUMER.MSG.NEXT.MESH.c",                                  // pulling from a consumer by name
		"$JS.API.CONSUMER.DELETE.MESH.c",                                    // deleting one
		"$JS.API.CONSUMER.LIST.MESH",                                        // listing them
		"$JS.API.DIRECT.GET.MESH_SECRETS",                                   // the secrets' salts
		"mesh.secret.x",                                                     // writing one
		"mesh.live.db-1",                                                    // keeping another node looking alive (issue 28)
		"mesh.newest.db-1",                                                  // asking for another's newest declaration (issue 29)
		"mesh.contentkey.db-1",                                              // asking for the content keys of another's files (issue 29)
		"mesh.logs.db-1",                                                    // asking for another's programs' logs (issue 31 point 8)
		"mesh.logs.app-1",                                                   // or its own: only the operator asks
		"mesh.logs.db-1.to.x",                                               // answering for another's programs
		"mesh.logs.app-1.to.x.y",                                            // under its own prefix, deeper than a token
	}
	for _, subject := range refusedPub {
		if err := nc.Publish(subject, []byte("{}")); err != nil {
			t.Fatal(err)
		}
		v.waitFor(t, fmt.Sprintf("Publish to %q", subject))
	}
	if !m.h.Live.LastHeard("db-1").IsZero() {
		t.Fatal("app-1's publish on db-1's liveness subject was heard as db-1")
	}
	for _, subject := range []string{"mesh.ev.>", "mesh.ev.node.db-1.DeclarationSent", "mesh.ev.node.app-1.DeclarationSent", "mesh.told.db-1", "mesh.told.>", "mesh.rp.>", "_INBOX.>", "_INBOX_db-1.>",
		"mesh.logs.db-1", "mesh.logs.db-1.to.>", "mesh.logs.>"} { // another's logs: asked for, or answered
		if _, err := nc.Subscribe(subject, func(*nats.Msg) {}); err == nil {
			v.waitFor(t, fmt.Sprintf("Subscription to %q", subject))
		}
	}
	c1, cancel := short()
	defer cancel()
	if _, found, err := st.Last(c1, events.DeclarationSubject("db-1")); err == nil || found {
		t.Fatalf("app-1 read db-1's newest declaration: found %v, err %v", found, err)
	}
	c2, cancel := short()
	defer cancel()
	if err := st.Read(c2, store.ReadOptions{Follow: true, Filter: events.DeclarationSubject("app-1")}, func(store.Msg) error { return nil }); err == nil {
		t.Fatalf("app-1 created a consumer: %v", err)
	}
	c3, cancel := short()
	defer cancel()
	forged := events.DeclarationApplied{Node: "db-1", Sequence: 1, Digest: "d"}
	if _, err := st.Report(c3, "db-1", wire.NewCommandID(), forged, nodeSealing(t, app)); err == nil {
		t.Fatal("app-1 published a report for db-1")
	}
	cl := client.Client{NC: nc, Timeout: 500 * time.Millisecond}
	var s wire.StatusReport
	if err := cl.Call(ctx, wire.SubjectStatus, wire.StatusRequest{}, &s); err == nil {
		t.Fatal("app-1 called the controller's status")
	}
	// Only app-1's own reports landed.
	if err := m.h.Core.Store.Read(ctx, store.ReadOptions{Filter: "mesh.rp.>"}, func(msg store.Msg) error {
		if !strings.HasPrefix(msg.Subject, "mesh.rp.app-1.") || strings.Count(msg.Subject, ".") != 3 {
			t.Errorf("a report app-1 may not publish landed: %s", msg.Subject)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	// The operator, from the home: asks the controller, reads the stream.
	opts, err := busauth.OperatorOptions(m.home)
	if err != nil || len(opts) == 0 {
		t.Fatalf("the operator key in the home: %v", err)
	}
	var ov violations
	op, err := nats.Connect(m.srv.ClientURL(), append(opts, nats.ErrorHandler(ov.handler))...)
	if err != nil {
		t.Fatalf("the operator connecting: %v", err)
	}
	defer op.Close()
	ocl := client.Client{NC: op}
	if err := ocl.Call(ctx, wire.SubjectStatus, wire.StatusRequest{}, &s); err != nil || len(s.Nodes) != 2 {
		t.Fatalf("the operator's status: %+v %v", s, err)
	}
	ost, err := store.Attach(ctx, op, "")
	if err != nil {
		t.Fatalf("the operator reading the stream's information: %v", err)
	}
	if _, err := ost.Get(ctx, 1); err != nil {
		t.Fatalf("the operator reading event 1: %v", err)
	}
	n := 0
	if err := ost.Read(ctx, store.ReadOptions{}, func(store.Msg) error { n++; return nil }); err != nil || n == 0 {
		t.Fatalf("the operator reading the stream through a consumer: %d, %v", n, err)
	}
	// Asks a node for its programs' logs: app-1 hears it on its own
	// subject and answers under its own prefix (as its agent does).
	hears, err := nc.Subscribe(events.LogsSubject("app-1"), func(r *nats.Msg) {
		_ = nc.Publish(r.Reply, []byte(`{"lines":[{"time":"2026-12-04T21:00:00Z","stream":"stdout","text":"hello"}],"last":1}`))
	})
	if err != nil || nc.Flush() != nil {
		t.Fatalf("app-1 hearing requests for its logs: %v", err)
	}
	ocl.Timeout = 5 * time.Second
	if r, err := ocl.Logs(ctx, "app-1", wire.LogsRequest{Module: "m"}); err != nil || len(r.Lines) != 1 || r.Lines[0].Text != "hello" {
		t.Fatalf("the operator asking app-1 for a log: %+v %v", r, err)
	}
	_ = hears.Unsubscribe()
	// ... and may not write it, nor reshape or remove it, nor answer for
	// a node's programs.
	for _, subject := range []string{"mesh.logs.db-1.to.x", "mesh.ev.node.db-1.NodeRetired", "mesh.rp.db-1.DeclarationApplied",
		"$JS.API.STREAM.DELETE.MESH", "$JS.API.STREAM.PURGE.MESH", "$JS.API.STREAM.UPDATE.MESH", "$JS.API.STREAM.MSG.DELETE.MESH",
		// nor write, erase or remove a secret's salt: forgetting is a verb.
		"mesh.secret.x", "$JS.API.STREAM.MSG.DELETE.MESH_SECRETS", "$JS.API.STREAM.PURGE.MESH_SECRETS", "$JS.API.STREAM.DELETE.MESH_SECRETS"} {
		if err := op.Publish(subject, []byte("{}")); err != nil {
			t.Fatal(err)
		}
		ov.waitFor(t, fmt.Sprintf("Publish to %q", subject))
	}

	// Who may not connect: nobody, a node with another's key, a retired node.
	if _, err := nats.Connect(m.srv.ClientURL()); err == nil {
		t.Fatal("a connection with no identity was let in")
	}
	// app-1's public key without its seed: the nonce signed by another key.
	other, _ := nkeys.CreateUser()
	appKey, _ := nkeys.FromSeed([]byte(app.Seed))
	appPub, _ := appKey.PublicKey()
	if _, err := nats.Connect(m.srv.ClientURL(), nats.Nkey(appPub, other.Sign), nats.UserInfo("app-1", "")); err == nil {
		t.Fatal("app-1's public key was let in without its seed")
	}
	stolen := db
	stolen.Seed = app.Seed
	if _, err := m.connectAs(stolen, nil); err == nil {
		t.Fatal("app-1's key was let in as db-1")
	}
	if _, err := m.h.Nodes.Retire(ctx, wire.RetireRequest{CommandID: wire.NewCommandID(), Name: "db-1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.connectAs(db, nil); err == nil {
		t.Fatal("retired db-1 was let in")
	}

	// The controller's system identity: lists connections on every
	// server, and nothing of the mesh's.
	sysKey, _ := busauth.SystemKey(m.h.Core.Key)
	sysPub, _ := sysKey.PublicKey()
	var sv violations
	sys, err := nats.Connect(m.srv.ClientURL(), nats.Nkey(sysPub, sysKey.Sign), nats.UserInfo(busauth.SystemUser, ""),
		nats.CustomInboxPrefix("_INBOX_"+busauth.SystemUser), nats.ErrorHandler(sv.handler))
	if err != nil {
		t.Fatalf("the controller's system identity connecting: %v", err)
	}
	defer sys.Close()
	if r, err := sys.Request("$SYS.REQ.SERVER.PING.CONNZ", []byte(`{"auth":true,"user":"app-1"}`), 5*time.Second); err != nil || !strings.Contains(string(r.Data), `"app-1"`) {
		t.Fatalf("the system identity listing app-1's connections: %v %v", r, err)
	}
	for _, subject := range []string{"mesh.op.open.status", "$SYS.REQ.SERVER.PING.VARZ", "$SYS.REQ.ACCOUNT.PING.CONNZ"} {
		if err := sys.Publish(subject, nil); err != nil {
			t.Fatal(err)
		}
		sv.waitFor(t, fmt.Sprintf("Publish to %q", subject))
	}
	// Nor can an identity of the mesh's account ask who is connected.
	if err := nc.Publish("$SYS.REQ.SERVER.PING.CONNZ", nil); err != nil {
		t.Fatal(err)
	}
	v.waitFor(t, `Publish to "$SYS.REQ.SERVER.PING.CONNZ"`)
}

// A connection's permissions run out and the controller decides again: a
// running agent goes on hearing its declarations across that, and a
// retired node is shut out of the bus.
func TestAClosedBusDecidesAgain(t *testing.T) {
	t.Parallel() // its own bus; mostly waiting for a connection's lifetime: beside the others
	const lifetime = 2 * time.Second
	m := newClosedMesh(t, lifetime)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	j := m.enrollAndDeclare("app-1")
	opts, err := j.Options()
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(m.srv.ClientURL(), append(opts, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))...)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	a, err := agent.Open(ctx, nc, agent.Config{Join: j, Root: t.TempDir(), RetryEvery: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	ran := make(chan error, 1)
	go func() { ran <- a.Run(ctx) }()
	embeddedtest.Eventually(t, "the bus to close the connection at the end of its lifetime", func() bool { return nc.Stats().Reconnects > 0 })
	d, err := m.h.Push.Declare(ctx, wire.DeclareRequest{CommandID: wire.NewCommandID(), Node: "app-1", File: "f.json",
		Body: `{"resources":[{"kind":"file","path":"/etc/after","mode":"0644","content":"x"}]}`})
	if err != nil {
		t.Fatal(err)
	}
	if err := client.WaitReport(ctx, m.h.Core.Store, m.h.Status, "app-1", d.Digest, d.StreamSeq, reportWait); err != nil {
		t.Fatalf("the agent after its connection was decided again: %v", err)
	}

	if _, err := m.h.Nodes.Retire(ctx, wire.RetireRequest{CommandID: wire.NewCommandID(), Name: "app-1"}); err != nil {
		t.Fatal(err)
	}
	embeddedtest.Eventually(t, "retired app-1 to lose its connection", func() bool { return !nc.IsConnected() })
	if _, err := m.connectAs(j, nil); err == nil {
		t.Fatal("retired app-1 connected again")
	}
	cancel()
	<-ran
}

// On a NATS cluster configured as mesh bus-config prints, the controller on
// one server decides connections to every server.
func TestAClosedClusterIsDecidedByTheController(t *testing.T) {
	t.Parallel() // its own cluster; mostly waiting for it: beside the others
	ctx := context.Background()
	key, _ := nkeys.CreateAccount()
	seed, _ := key.Seed()
	home := t.TempDir()
	if err := os.WriteFile(filepath.Join(home, commands.KeyFile), seed, 0o600); err != nil {
		t.Fatal(err)
	}
	keys, err := busauth.ClusterBusKeys(key)
	if err != nil {
		t.Fatal(err)
	}
	servers, err := embedded.StartClosedCluster(ctx, t.TempDir(), 3, embedded.AuthOf(keys.Public()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, s := range servers {
			s.Close()
		}
	})
	nc, err := nats.Connect(servers[0].ClientURL(), keys.ControllerOption())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	ctrl, err := commands.StartController(ctx, nc, commands.ControllerConfig{Home: home, Stream: store.StreamConfig{Replicas: 3}, Callout: keys.Issuer})
	if err != nil {
		t.Fatal(err)
	}
	defer ctrl.Close()
	m := &closedMesh{t: t, srv: servers[2], h: ctrl, home: home}
	app := m.enrollAndDeclare("app-1")
	m.enrollAndDeclare("db-1")

	var v violations
	anc, err := m.connectAs(app, &v)
	if err != nil {
		t.Fatalf("app-1 connecting to another server of the cluster: %v", err)
	}
	st, _ := store.AttachNode(anc, "")
	if _, found, err := st.Last(ctx, events.DeclarationSubject("app-1")); err != nil || !found {
		t.Fatalf("app-1 reading its newest declaration: %v %v", found, err)
	}
	c, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	if _, found, err := st.Last(c, events.DeclarationSubject("db-1")); err == nil || found {
		t.Fatalf("app-1 read db-1's newest declaration: %v %v", found, err)
	}
	v.waitFor(t, "DIRECT.GET.MESH.mesh.ev.node.db-1")
	if _, err := nats.Connect(servers[1].ClientURL()); err == nil {
		t.Fatal("a connection with no identity was let in")
	}
	opts, _ := busauth.OperatorOptions(home)
	op, err := nats.Connect(servers[1].ClientURL(), opts...)
	if err != nil {
		t.Fatalf("the operator connecting: %v", err)
	}
	defer op.Close()
	var s wire.StatusReport
	if err := (&client.Client{NC: op}).Call(ctx, wire.SubjectStatus, wire.StatusRequest{}, &s); err != nil || len(s.Nodes) != 2 {
		t.Fatalf("the operator's status: %+v %v", s, err)
	}
	// Retired, app-1's connection to another server than the controller's
	// is ended there (the system account's kick, issue 29).
	appOpts, err := app.Options()
	if err != nil {
		t.Fatal(err)
	}
	cut, err := nats.Connect(servers[2].ClientURL(), append(appOpts, nats.NoReconnect())...)
	if err != nil {
		t.Fatal(err)
	}
	defer cut.Close()
	if _, err := ctrl.Nodes.Retire(ctx, wire.RetireRequest{CommandID: wire.NewCommandID(), Name: "app-1"}); err != nil {
		t.Fatal(err)
	}
	embeddedtest.Eventually(t, "retired app-1's connection to another server to be ended", cut.IsClosed)
}
