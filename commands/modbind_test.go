package commands_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/meshmod"
	"github.com/meshctl/mesh/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// A module's identity is bound to its node (issue 29), on a real closed
// bus: greeter on web-1 can neither take nor see the requests meant for
// greeter on db-1, a consumer asks any provider's endpoint and hears no
// request, and web-1's instance can neither read nor write db-1's keys of
// the module's shared state bucket, however it asks. Fails when a
// provider's grant reaches another node's endpoint (main granted
// mesh.svc.greeting.>, and web-1 answered 5 of 10 of db-1's requests and
// saw them all), or its state grant reaches another node's keys.
func TestAModuleIsBoundToItsNode(t *testing.T) {
	ctx := context.Background()
	m := newTrustMesh(t, true)
	for _, node := range []string{"web-1", "db-1"} {
		_, err := m.h.Nodes.Enroll(ctx, wire.EnrollRequest{CommandID: wire.NewCommandID(), Name: node})
		m.must(err)
	}
	// Nor can a node take the any-provider token as its name.
	if _, err := m.h.Nodes.Enroll(ctx, wire.EnrollRequest{CommandID: wire.NewCommandID(), Name: events.ServiceAny}); err == nil {
		t.Fatalf("a node was enrolled as %q, whose endpoints every provider answers", events.ServiceAny)
	}
	for _, doc := range []string{
		`{"module":"greeter","provides":["greeting"],"run":{"command":"/bin/true"}}`,
		`{"module":"app","consumes":["greeting"],"run":{"command":"/bin/true"}}`,
	} {
		_, err := m.h.Modules.RegisterModule(ctx, wire.RegisterRequest{CommandID: wire.NewCommandID(), File: "m.json", Manifest: doc})
		m.must(err)
	}
	for _, a := range [][2]string{{"web-1", "greeter"}, {"db-1", "greeter"}, {"web-1", "app"}} {
		_, err := m.h.Nodes.Assign(ctx, wire.AssignRequest{CommandID: wire.NewCommandID(), Node: a[0], Module: a[1]})
		m.must(err)
	}
	db, _, err := m.connectModule("db-1", "greeter", nil, nil)
	m.must(err)
	var v violations
	web, _, err := m.connectModule("web-1", "greeter", nil, &v)
	m.must(err)
	var av violations
	app, _, err := m.connectModule("web-1", "app", nil, &av)
	m.must(err)

	// Services: db-1 answers its own endpoint; web-1 tries to take and to
	// overhear it, and may answer only its own and the any-provider one.
	answer := func(nc *nats.Conn, subject, word string, heard *atomic.Int32) {
		t.Helper()
		if _, err := nc.QueueSubscribe(subject, "greeter", func(msg *nats.Msg) { heard.Add(1); msg.Respond([]byte(word)) }); err != nil {
			t.Fatal(err)
		}
	}
	var dbHeard, stolen, overheard, webHeard atomic.Int32
	answer(db, events.ServiceSubject("greeting", "db-1"), "db-1", &dbHeard)
	m.must(db.Flush())
	answer(web, events.ServiceSubject("greeting", "db-1"), "web-1", &stolen)
	if _, err := web.Subscribe(events.ServiceSubject("greeting", "db-1"), func(*nats.Msg) { overheard.Add(1) }); err != nil {
		t.Fatal(err)
	}
	for _, subject := range []string{events.ServiceSubject("greeting", "web-1"), events.ServiceSubject("greeting", events.ServiceAny)} {
		answer(web, subject, "web-1", &webHeard)
	}
	m.must(web.Flush())
	v.waitFor(t, fmt.Sprintf("Subscription to %q", events.ServiceSubject("greeting", "db-1")))
	// A consumer asks; it hears no request, not even for what it consumes.
	if _, err := app.Subscribe(events.ServiceSubject("greeting", "db-1"), func(*nats.Msg) {}); err != nil {
		t.Fatal(err)
	}
	av.waitFor(t, fmt.Sprintf("Subscription to %q", events.ServiceSubject("greeting", "db-1")))
	for i := range 10 {
		r, err := app.Request(events.ServiceSubject("greeting", "db-1"), nil, 5*time.Second)
		if err != nil || string(r.Data) != "db-1" {
			t.Fatalf("app's request %d for db-1's greeting: %v %v", i, r, err)
		}
	}
	if r, err := app.Request(events.ServiceSubject("greeting", "web-1"), nil, 5*time.Second); err != nil || string(r.Data) != "web-1" {
		t.Fatalf("app asking web-1's own greeter: %v %v", r, err)
	}
	if n, s, o := dbHeard.Load(), stolen.Load(), overheard.Load(); n != 10 || s != 0 || o != 0 {
		t.Fatalf("of 10 requests meant for db-1, db-1 answered %d, web-1's greeter answered %d and overheard %d", n, s, o)
	}

	// State: each instance writes its own keys; web-1's tries db-1's.
	bucket := func(nc *nats.Conn) jetstream.KeyValue {
		t.Helper()
		js, err := jetstream.New(nc)
		m.must(err)
		kv, err := js.KeyValue(ctx, events.StateBucket("greeter"))
		m.must(err)
		return kv
	}
	dbKV, webKV := bucket(db), bucket(web)
	rev, err := dbKV.Put(ctx, "db-1.served", []byte("7"))
	if err != nil {
		t.Fatalf("db-1's greeter writing its own state: %v", err)
	}
	short := func() (context.Context, context.CancelFunc) { return context.WithTimeout(ctx, 500*time.Millisecond) }
	attacks := map[string]func(context.Context) error{
		"put":        func(c context.Context) error { _, err := webKV.Put(c, "db-1.served", []byte("0")); return err },
		"delete":     func(c context.Context) error { return webKV.Delete(c, "db-1.served") },
		"get":        func(c context.Context) error { _, err := webKV.Get(c, "db-1.served"); return err },
		"get by rev": func(c context.Context) error { _, err := webKV.GetRevision(c, "db-1.served", rev); return err },
		"history":    func(c context.Context) error { _, err := webKV.History(c, "db-1.served"); return err },
		"all keys":   func(c context.Context) error { _, err := webKV.Keys(c); return err },
		"watch": func(c context.Context) error {
			w, err := webKV.Watch(c, "db-1.>")
			if err == nil {
				defer w.Stop()
				for e := range w.Updates() {
					if e != nil {
						return nil
					}
				}
				return c.Err()
			}
			return err
		},
	}
	// All at once: a refused one is waited out to its short deadline (the
	// bus answers a denied request with silence), and seven of them one
	// after another were three and a half seconds of this test.
	var attacking sync.WaitGroup
	for what, attack := range attacks {
		attacking.Go(func() {
			c, cancel := short()
			defer cancel()
			if attack(c) == nil {
				t.Errorf("web-1's greeter could %s db-1's state", what)
			}
		})
	}
	attacking.Wait()
	if e, err := dbKV.Get(ctx, "db-1.served"); err != nil || string(e.Value()) != "7" {
		t.Fatalf("db-1's state after web-1's attempts: %v %v", e, err)
	}

	// web-1's own state, as its program reaches it (meshmod, with the
	// environment its agent gives it).
	mod := moduleAsItsAgentStartsIt(t, m, "web-1", "greeter")
	state, err := mod.State(ctx)
	m.must(err)
	if _, err := state.Put(ctx, "served", []byte("3")); err != nil {
		t.Fatalf("web-1's greeter writing its own state through meshmod: %v", err)
	}
	if e, err := state.Get(ctx, "served"); err != nil || string(e.Value()) != "3" || e.Key() != "web-1.served" {
		t.Fatalf("web-1's greeter reading its own state through meshmod: %v %v", e, err)
	}
	if keys, err := state.Keys(ctx); err != nil || !slices.Equal(keys, []string{"served"}) {
		t.Fatalf("web-1's greeter listing its own keys: %v %v", keys, err)
	}
}

// moduleAsItsAgentStartsIt connects through meshmod with the environment
// the agent gives a module's program (agent/identity.go).
func moduleAsItsAgentStartsIt(t *testing.T, m *trustMesh, node, module string) *meshmod.Module {
	t.Helper()
	_, key, err := m.connectModule(node, module, nil, nil)
	m.must(err)
	seed, err := key.Seed()
	m.must(err)
	file := filepath.Join(t.TempDir(), module+".nk")
	m.must(os.WriteFile(file, seed, 0o600))
	for k, v := range map[string]string{
		"MESH_NODE": node, "MESH_MODULE": module, "MESH_NATS_URL": m.srv.ClientURL(), "MESH_USER": events.ModuleUser(node, module),
		"MESH_NKEY": file, "MESH_INBOX": events.ModuleInbox(node, module),
		"MESH_STATE": events.StateBucket(module), "MESH_STATE_PREFIX": events.StatePrefix(node),
	} {
		t.Setenv(k, v)
	}
	mod, err := meshmod.Connect(nats.MaxReconnects(0))
	m.must(err)
	t.Cleanup(mod.Close)
	return mod
}
