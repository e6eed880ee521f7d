package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/meshctl/mesh/embedded/embeddedtest"
	"github.com/meshctl/mesh/wire"

	"github.com/meshctl/mesh/agent"
	"github.com/nats-io/nats.go"
)

// meshWithNode runs mesh up in a fresh home with web-1 enrolled, and
// connects as web-1 with its join string.
func meshWithNode(t *testing.T) (string, *nats.Conn) {
	t.Helper()
	home := t.TempDir()
	start(t, "ready", "--home", home, "up", "--listen", freeAddr(t))
	r := mesh(t, home, "node", "enroll", "web-1")
	lines := strings.Split(strings.TrimSpace(r.out), "\n")
	return home, nodeConn(t, lines[len(lines)-1])
}

// Foreign messages as an operator meets them: a node publishes garbage under
// its own reports; status is not well and names it, mesh events marks it and
// fails, audit names it; once acknowledged, status is well again, events
// shows it acknowledged, audit still lists it and holds.
func TestForeignMessagesAreSeenAndAnswered(t *testing.T) {
	t.Parallel()
	home, nc := meshWithNode(t)
	var r result
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
	// A sequence that is no foreign message is a refusal (exit 1, as an
	// unknown node is), not a request not understood (2).
	if r = mesh(t, home, "foreign", "ack", "1"); r.code != 1 || !strings.Contains(r.err, "not a foreign message") {
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

// Many foreign messages acknowledged at once (issue 29: 23,812 took as many
// commands): --from/--to and --all are one event each, whatever they cover;
// input that names nothing, or two ways at once, is one sentence and a
// non-zero exit; nothing left is said. Fails when a range is refused or
// recorded as more than one event.
func TestForeignMessagesAreAcknowledgedInBulk(t *testing.T) {
	t.Parallel()
	home, nc := meshWithNode(t)
	var r result
	const junk = 30 // fewer than a flood
	for range junk {
		if err := nc.Publish("mesh.rp.web-1.DeclarationApplied", []byte("not an event")); err != nil {
			t.Fatal(err)
		}
	}
	nc.Flush()
	var first, last uint64
	embeddedtest.Eventually(t, "the foreign messages in foreign list", func() bool {
		r = mesh(t, home, "foreign", "list", "--json")
		var l wire.ForeignList
		if json.Unmarshal([]byte(r.out), &l) != nil || l.Open != junk {
			return false
		}
		first, last = l.Foreign[0].Seq, l.Foreign[junk-1].Seq
		return true
	})
	for _, bad := range [][]string{
		{"--from", fmt.Sprint(last), "--to", fmt.Sprint(first)},
		{"--all", fmt.Sprint(first)},
		{"--from", fmt.Sprint(first)},
		{"--from", "1", "--to", "2"},
		{},
	} {
		if r = mesh(t, home, append([]string{"foreign", "ack"}, bad...)...); r.code == 0 || strings.Count(strings.TrimSpace(r.err), "\n") != 0 || r.err == "" {
			t.Fatalf("foreign ack %v: %+v", bad, r)
		}
	}
	events := func() int {
		r := mesh(t, home, "events", "--json")
		return strings.Count(r.out, `"ForeignAcknowledged"`)
	}
	mid := first + (last-first)/2
	if r = mesh(t, home, "foreign", "ack", "--from", fmt.Sprint(first), "--to", fmt.Sprint(mid)); r.code != 0 ||
		!strings.Contains(r.out, fmt.Sprintf("acknowledged %d foreign message(s) from event %d to %d", mid-first+1, first, mid)) {
		t.Fatalf("foreign ack --from --to: %+v", r)
	}
	if r = mesh(t, home, "foreign", "ack", "--all"); r.code != 0 || !strings.Contains(r.out, fmt.Sprintf("acknowledged %d foreign message(s)", last-mid)) {
		t.Fatalf("foreign ack --all: %+v", r)
	}
	if n := events(); n != 2 {
		t.Fatalf("two bulk acknowledgements recorded as %d events", n)
	}
	if r = mesh(t, home, "foreign", "ack", "--all"); r.code != 0 || !strings.Contains(r.out, "nothing to do") {
		t.Fatalf("foreign ack --all with nothing left: %+v", r)
	}
	if r = mesh(t, home, "foreign", "ack", "--from", fmt.Sprint(first), "--to", fmt.Sprint(last)); r.code != 0 || !strings.Contains(r.out, "nothing to do") {
		t.Fatalf("foreign ack of a range acknowledged before: %+v", r)
	}
	if r = mesh(t, home, "status"); strings.Contains(r.out, "foreign") {
		t.Fatalf("status after the acknowledgements: %+v", r)
	}
}
