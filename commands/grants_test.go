package commands_test

import (
	"context"
	"testing"
	"time"

	"github.com/meshctl/mesh/commands"
	"github.com/meshctl/mesh/declaration"
	"github.com/meshctl/mesh/embedded/embeddedtest"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/events/store"
	"github.com/meshctl/mesh/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"
)

// grantMesh is a closed mesh of box and box-2: greeter on box provides
// greeting, app on box consumes it, builder on box holds the seat builder.
func grantMesh(t *testing.T) *trustMesh {
	t.Helper()
	ctx := context.Background()
	m := newTrustMesh(t, true)
	for _, node := range []string{"box", "box-2"} {
		_, err := m.h.Nodes.Enroll(ctx, wire.EnrollRequest{CommandID: wire.NewCommandID(), Name: node})
		m.must(err)
	}
	for _, doc := range []string{
		`{"module":"greeter","provides":["greeting"],"run":{"command":"/bin/true"}}`,
		`{"module":"app","consumes":["greeting"],"run":{"command":"/bin/true"}}`,
		`{"module":"builder","claims":["builder"],"run":{"command":"/bin/true"}}`,
	} {
		_, err := m.h.Modules.RegisterModule(ctx, wire.RegisterRequest{CommandID: wire.NewCommandID(), File: "m.json", Manifest: doc})
		m.must(err)
	}
	for _, mod := range []string{"greeter", "app", "builder"} {
		_, err := m.h.Nodes.Assign(ctx, wire.AssignRequest{CommandID: wire.NewCommandID(), Node: "box", Module: mod})
		m.must(err)
	}
	return m
}

// connectNode connects as node with its join string, never reconnecting:
// a connection the bus ends is closed, for the test to see (with other
// servers to try, a client told MaxReconnects(0) may still be trying).
func (m *trustMesh) connectNode(node string) *nats.Conn {
	m.t.Helper()
	opts, err := m.join(node).Options()
	m.must(err)
	nc, err := nats.Connect(m.srv.ClientURL(), append(opts, nats.NoReconnect())...)
	m.must(err)
	m.t.Cleanup(nc.Close)
	return nc
}

func (m *trustMesh) mustModule(node, module string) *nats.Conn {
	m.t.Helper()
	nc, _, err := m.connectModule(node, module, nil, nil)
	if err != nil {
		m.t.Fatalf("%s on %s connecting: %v", module, node, err)
	}
	return nc
}

// moduleSealing is what a module of key signs and MACs its standing with.
func moduleSealing(t *testing.T, key nkeys.KeyPair) store.Sealing {
	t.Helper()
	signer, err := declaration.NewSigner(key)
	if err != nil {
		t.Fatal(err)
	}
	mac, err := declaration.ReportMACKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return store.Sealing{Signer: signer, MAC: mac}
}

func cutWithin(t *testing.T, who string, nc *nats.Conn) {
	t.Helper()
	embeddedtest.Eventually(t, who+"'s connection to be ended", nc.IsClosed)
}

// takeWork is the seat builder's holder taking one piece of work from its
// queue as nc.
func takeWork(ctx context.Context, nc *nats.Conn) (string, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return "", err
	}
	cctx, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
	defer cancel()
	c, err := js.CreateOrUpdateConsumer(cctx, events.SeatStream("builder"), jetstream.ConsumerConfig{Durable: "worker", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		return "", err
	}
	batch, err := c.Fetch(1, jetstream.FetchMaxWait(500*time.Millisecond))
	if err != nil {
		return "", err
	}
	for msg := range batch.Messages() {
		return string(msg.Data()), msg.DoubleAck(cctx)
	}
	return "", batch.Error()
}

// Permissions follow the log at once (issue 29), on a real closed bus:
// connections opened before an unassignment, a seat's handover and a
// retirement are ended as each is folded, and connect again only to be
// decided as the log now says: the former holder takes no more work, the
// retired node and its modules are refused. A standing the retired node's
// module had posted holds nothing after. Fails when a connection keeps its
// grant for its lifetime (main: ten minutes), or a retired node's standing
// is still counted.
func TestPermissionsFollowTheLog(t *testing.T) {
	t.Parallel() // its own bus and homes; long and partly waiting: beside the others
	ctx := context.Background()
	m := grantMesh(t)

	// Unassigned: app on box is ended, and may not come back.
	app := m.mustModule("box", "app")
	_, err := m.h.Nodes.Unassign(ctx, wire.UnassignRequest{CommandID: wire.NewCommandID(), Node: "box", Module: "app"})
	m.must(err)
	cutWithin(t, "app on box", app)
	if _, _, err := m.connectModule("box", "app", nil, nil); err == nil {
		t.Fatal("app on box connected again after it was unassigned")
	}

	// Handed over: the holder's connection, which may take the seat's
	// work, is ended when the handover starts; its next one may not.
	op, err := nats.Connect(m.srv.ClientURL(), operatorOptions(t, m.home)...)
	m.must(err)
	defer op.Close()
	ojs, err := jetstream.New(op)
	m.must(err)
	builder := m.mustModule("box", "builder")
	if _, err := takeWork(ctx, builder); err != nil {
		t.Fatalf("the seat's holder making its consumer before the handover: %v", err)
	}
	_, err = m.h.Seats.HandoverSeat(ctx, wire.HandoverRequest{CommandID: wire.NewCommandID(), Seat: "builder", To: "box-2"})
	m.must(err)
	cutWithin(t, "builder on box (the seat's former holder)", builder)
	if _, err := ojs.Publish(ctx, events.SeatWork("builder"), []byte("build v3")); err != nil {
		t.Fatal(err)
	}
	if got, err := takeWork(ctx, m.mustModule("box", "builder")); err == nil {
		t.Fatalf("the seat's former holder took %q after the handover started", got)
	}

	// A standing by greeter on box, then box retired: every connection of
	// box and of its modules is ended, and the standing holds nothing.
	greeter := m.mustModule("box", "greeter")
	_, key, err := m.connectModule("box", "greeter", nil, nil)
	m.must(err)
	// app consumes greeting on box again: a standing counts only toward a
	// consumer resolved to its provider (unassigned above).
	_, err = m.h.Nodes.Assign(ctx, wire.AssignRequest{CommandID: wire.NewCommandID(), Node: "box", Module: "app"})
	m.must(err)
	st, err := store.AttachNode(greeter, "")
	m.must(err)
	_, err = st.Report(ctx, "box", "std-1", events.ProviderFailing{Provider: "greeter", Machine: "box", Consumer: "app", Word: "down"}, moduleSealing(t, key))
	m.must(err)
	m.settle()
	if s, err := m.h.Status.Status(ctx, wire.StatusRequest{}); err != nil || len(s.Standings) != 1 {
		t.Fatalf("greeter's standing before box retired: %+v %v", s.Standings, err)
	}
	node := m.connectNode("box")
	_, err = m.h.Nodes.Retire(ctx, wire.RetireRequest{CommandID: wire.NewCommandID(), Name: "box"})
	m.must(err)
	cutWithin(t, "box", node)
	cutWithin(t, "greeter on box", greeter)
	m.settle()
	if s, err := m.h.Status.Status(ctx, wire.StatusRequest{}); err != nil || len(s.Standings) != 0 {
		t.Fatalf("a retired node's standing still counts: %+v %v", s.Standings, err)
	}
	if n, err := m.h.Access.CutNode(ctx, "box"); err != nil || n != 0 {
		t.Fatalf("cutting a retired node with no connection left: %d %v", n, err)
	}
}

// A controller that was not running when the log took a grant away ends
// the connection holding it when it starts (its sweep). Fails when only
// the events a running controller reads cut connections.
func TestAStartingControllerSweepsStaleConnections(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m := grantMesh(t)
	app := m.mustModule("box", "app")
	node := m.connectNode("box-2")
	m.ctrl.Close()
	m.ctrl = nil
	// The log changes while no controller answers the bus's callout: a
	// controller that does not close the bus appends it.
	open, err := commands.StartController(ctx, m.nc, commands.ControllerConfig{Home: m.home})
	m.must(err)
	_, err = open.Nodes.Unassign(ctx, wire.UnassignRequest{CommandID: wire.NewCommandID(), Node: "box", Module: "app"})
	m.must(err)
	_, err = open.Nodes.Retire(ctx, wire.RetireRequest{CommandID: wire.NewCommandID(), Name: "box-2"})
	m.must(err)
	m.must(open.Close())
	if app.IsClosed() || node.IsClosed() {
		t.Fatal("a connection was ended while no controller closed the bus")
	}
	m.start()
	cutWithin(t, "app on box", app)
	cutWithin(t, "box-2", node)
}
