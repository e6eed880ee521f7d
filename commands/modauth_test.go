package commands_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/meshctl/mesh/busauth"
	"github.com/meshctl/mesh/declaration"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/events/store"
	"github.com/meshctl/mesh/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"
)

// connectModule connects as module on node with the key its agent would
// derive from the node's join string (or with key, when given).
func (m *trustMesh) connectModule(node, module string, key nkeys.KeyPair, v *violations) (*nats.Conn, nkeys.KeyPair, error) {
	m.t.Helper()
	if key == nil {
		bus, err := nkeys.FromSeed([]byte(m.join(node).Seed))
		m.must(err)
		key, err = declaration.ModuleKey(bus, module)
		m.must(err)
	}
	pub, _ := key.PublicKey()
	opts := []nats.Option{nats.Nkey(pub, key.Sign), nats.UserInfo(events.ModuleUser(node, module), ""),
		nats.CustomInboxPrefix(events.ModuleInbox(node, module)), nats.MaxReconnects(0)}
	if v != nil {
		opts = append(opts, nats.ErrorHandler(v.handler))
	}
	nc, err := nats.Connect(m.srv.ClientURL(), opts...)
	if err == nil {
		m.t.Cleanup(nc.Close)
	}
	return nc, key, err
}

// A running module's identity on a real closed bus (issue 15) can do
// exactly what its manifest says: every grant is tried, and every refusal.
// Fails when ModulePermissions is widened (a refusal passes) or narrowed
// (a grant fails), when the callout lets in a module not assigned or a key
// not its own, or when the fold takes a standing for another provider.
func TestAModuleIdentityDoesWhatItsManifestSays(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m := newTrustMesh(t, true)
	_, err := m.h.Nodes.Enroll(ctx, wire.EnrollRequest{CommandID: wire.NewCommandID(), Name: "box"})
	m.must(err)
	for _, doc := range []string{
		`{"module":"greeter","provides":["greeting"],"consumes":["time"],"run":{"command":"/bin/true"}}`,
		`{"module":"clock","provides":["time"],"run":{"command":"/bin/true"}}`,
		`{"module":"files","resources":[]}`,
		// A consumer of greeting, which greeter's standing may name.
		`{"module":"app","consumes":["greeting"],"resources":[]}`,
	} {
		_, err := m.h.Modules.RegisterModule(ctx, wire.RegisterRequest{CommandID: wire.NewCommandID(), File: "m.json", Manifest: doc})
		m.must(err)
	}
	for _, mod := range []string{"greeter", "files", "app"} {
		_, err := m.h.Nodes.Assign(ctx, wire.AssignRequest{CommandID: wire.NewCommandID(), Node: "box", Module: mod})
		m.must(err)
	}
	op, err := nats.Connect(m.srv.ClientURL(), operatorOptions(t, m.home)...)
	m.must(err)
	defer op.Close()

	var v violations
	nc, key, err := m.connectModule("box", "greeter", nil, &v)
	if err != nil {
		t.Fatalf("greeter on box connecting as itself: %v", err)
	}
	// Granted: answering on what it provides.
	sub, err := nc.Subscribe(events.ServiceSubject("greeting", "box"), func(msg *nats.Msg) { msg.Respond([]byte("hello")) })
	m.must(err)
	m.must(nc.Flush())
	if r, err := op.Request(events.ServiceSubject("greeting", "box"), nil, 5*time.Second); err != nil || string(r.Data) != "hello" {
		t.Fatalf("asking greeter for a greeting: %v %v", r, err)
	}
	sub.Unsubscribe()
	// Granted: asking for what it consumes, the answer on its own inbox.
	clock, err := op.Subscribe(events.ServiceSubject("time", "any"), func(msg *nats.Msg) { msg.Respond([]byte("noon")) })
	m.must(err)
	m.must(op.Flush())
	if r, err := nc.Request(events.ServiceSubject("time", "any"), nil, 5*time.Second); err != nil || string(r.Data) != "noon" {
		t.Fatalf("greeter asking the time: %v %v", r, err)
	}
	clock.Unsubscribe()
	// Granted: its node's keys of its state bucket.
	js, err := jetstream.New(nc)
	m.must(err)
	kv, err := js.KeyValue(ctx, events.StateBucket("greeter"))
	if err != nil {
		t.Fatalf("greeter opening its state bucket: %v", err)
	}
	if _, err := kv.Put(ctx, "box.served", []byte("1")); err != nil {
		t.Fatalf("greeter writing its state: %v", err)
	}
	if e, err := kv.Get(ctx, "box.served"); err != nil || string(e.Value()) != "1" {
		t.Fatalf("greeter reading its state: %v %v", e, err)
	}
	// Granted: its own standing, which the fold takes.
	signer, _ := declaration.NewSigner(key)
	mac, _ := declaration.ReportMACKey(key)
	st, err := store.AttachNode(nc, "")
	m.must(err)
	sealing := store.Sealing{Signer: signer, MAC: mac}
	_, err = st.Report(ctx, "box", "std-1", events.ProviderFailing{Provider: "greeter", Machine: "box", Consumer: "app", Word: "no greeting"}, sealing)
	m.must(err)
	// Landed on its allowed subject, set aside by the fold: a standing
	// for another provider.
	_, err = st.Report(ctx, "box", "std-2", events.ProviderFailing{Provider: "files", Machine: "box", Consumer: "app", Word: "forged"}, sealing)
	m.must(err)
	m.settle()
	s, err := m.h.Status.Status(ctx, wire.StatusRequest{})
	m.must(err)
	if len(s.Standings) != 1 || s.Standings[0].Provider != "greeter" {
		t.Fatalf("standings after greeter reported its own and another's: %+v", s.Standings)
	}
	if f, _ := m.h.Access.ListForeign(ctx, wire.Empty{}); len(f.Foreign) != 1 || !strings.Contains(f.Foreign[0].Reason, "MAC") && !strings.Contains(f.Foreign[0].Reason, "neither box's nor the controller's") {
		t.Fatalf("the standing for another provider was not set aside: %+v", f.Foreign)
	}

	// Refused: everything else.
	for _, subject := range []string{
		events.ServiceSubject("payments", "box"),                // a service it neither provides nor consumes
		"$KV." + events.StateBucket("clock") + ".box.served",    // another module's state
		"$JS.API.STREAM.INFO.KV_" + events.StateBucket("clock"), //
		"$KV." + events.StateBucket("greeter") + ".served",      // its module's state outside its node's keys
		"mesh.ev.node.box.ModuleAssigned",                       // the controller's events
		"mesh.op.open.status",                                   // the controller's verbs
		"mesh.rp.box.DeclarationApplied",                        // its node's reports
		"mesh.rp.other.ProviderFailing",                         // a standing on another machine
		"$JS.API.STREAM.INFO.MESH",                              // the event stream
		"$JS.API.DIRECT.GET.MESH.mesh.ev.node.box.DeclarationSent",
	} {
		m.must(nc.Publish(subject, []byte("{}")))
		v.waitFor(t, fmt.Sprintf("Publish to %q", subject))
	}
	for _, subject := range []string{events.ServiceEndpoints("payments"), events.ServiceEndpoints("time"), events.NodeInbox("box") + ".>", "_INBOX.>", "mesh.ev.>"} {
		if _, err := nc.Subscribe(subject, func(*nats.Msg) {}); err == nil {
			v.waitFor(t, fmt.Sprintf("Subscription to %q", subject))
		}
	}

	// Refused at the door: a module not assigned to the node, one that
	// does not run, and a key that is not the module's.
	for _, c := range []struct {
		module string
		key    nkeys.KeyPair
		why    string
	}{{"clock", nil, "not assigned"}, {"files", nil, "does not run"}, {"greeter", mustUser(t), "not that of greeter"}} {
		if _, _, err := m.connectModule("box", c.module, c.key, nil); err == nil {
			t.Fatalf("%s on box was let in (%s)", c.module, c.why)
		}
	}
}

func mustUser(t *testing.T) nkeys.KeyPair {
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	return kp
}

func operatorOptions(t *testing.T, home string) []nats.Option {
	t.Helper()
	opts, err := busauth.OperatorOptions(home)
	if err != nil {
		t.Fatal(err)
	}
	return opts
}
