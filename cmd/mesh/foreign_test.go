package main

import (
	"context"
	"github.com/meshctl/mesh/embedded/embeddedtest"
	"log/slog"
	"strings"
	"testing"

	"github.com/meshctl/mesh/agent"
	"github.com/nats-io/nats.go"
)

// Foreign messages as an operator meets them: a node publishes garbage under
// its own reports; status is not well and names it, mesh events marks it and
// fails, audit names it; once acknowledged, status is well again, events
// shows it acknowledged, audit still lists it and holds.
func TestForeignMessagesAreSeenAndAnswered(t *testing.T) {
	t.Setenv("MESH_NATS_URL", "")
	home := t.TempDir()
	start(t, "ready", "--home", home, "up", "--listen", freeAddr(t))
	r := mesh(t, home, "node", "enroll", "web-1")
	lines := strings.Split(strings.TrimSpace(r.out), "\n")
	nc := nodeConn(t, lines[len(lines)-1])
	if err := nc.Publish("mesh.rp.web-1.DeclarationApplied", []byte("not an event")); err != nil {
		t.Fatal(err)
	}
	nc.Flush()
	// Its sequence, from the list.
	var seq string
	embeddedtest.Eventually(t, "the foreign message in foreign list", func() bool {
		if r = mesh(t, home, "foreign", "list"); strings.Contains(r.out, "1 not acknowledged") {
			seq = strings.Fields(strings.Split(r.out, "\n")[1])[0]
		}
		return seq != ""
	})
	if seq == "" || !strings.Contains(r.out, "not a mesh event") {
		t.Fatalf("foreign list: %+v", r)
	}
	if r = mesh(t, home, "status"); r.code != 1 || !strings.Contains(r.out, "1 foreign message(s) not acknowledged, the first event "+seq) {
		t.Fatalf("status with a foreign message: %+v", r)
	}
	if r = mesh(t, home, "events"); r.code != 1 || !strings.Contains(r.out, "FOREIGN: it is not a mesh event") || !strings.Contains(r.err, "mesh foreign ack") {
		t.Fatalf("events with a foreign message: %+v", r)
	}
	if r = mesh(t, home, "audit"); r.code != 1 || !strings.Contains(r.out, "foreign event "+seq) || !strings.Contains(r.out, "events/s") {
		t.Fatalf("audit with a foreign message: %+v", r)
	}
	if r = mesh(t, home, "foreign", "ack", "1"); r.code == 0 || !strings.Contains(r.err, "not a foreign message") {
		t.Fatalf("acknowledging what is not foreign: %+v", r)
	}
	if r = mesh(t, home, "foreign", "ack", seq); r.code != 0 || !strings.Contains(r.out, "acknowledged 1 foreign message(s)") {
		t.Fatalf("foreign ack: %+v", r)
	}
	if r = mesh(t, home, "foreign", "ack", seq); r.code != 0 || !strings.Contains(r.out, "already acknowledged, nothing to do") {
		t.Fatalf("foreign ack again: %+v", r)
	}
	if r = mesh(t, home, "status"); strings.Contains(r.out, "foreign") {
		t.Fatalf("status after the acknowledgement: %+v", r)
	}
	if r = mesh(t, home, "events"); r.code != 0 || !strings.Contains(r.out, "FOREIGN (acknowledged)") {
		t.Fatalf("events after the acknowledgement: %+v", r)
	}
	if r = mesh(t, home, "audit"); r.code != 0 || !strings.Contains(r.out, "acknowledged at event") || !strings.Contains(r.out, "the record holds") {
		t.Fatalf("audit after the acknowledgement: %+v", r)
	}
}

// nodeConn is a connection as the node a join string names, enrolled with
// keys made for it as its agent makes them (issue 29).
func nodeConn(t *testing.T, join string) *nats.Conn {
	t.Helper()
	j, err := agent.ParseJoin(join)
	if err != nil {
		t.Fatal(err)
	}
	dial := func(o ...nats.Option) (*nats.Conn, error) { return nats.Connect(j.Bus, o...) }
	if j, err = agent.Enrol(context.Background(), j, t.TempDir(), dial, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	opts, _ := j.Options()
	nc, err := nats.Connect(j.Bus, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}
