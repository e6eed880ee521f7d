package commands_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// A seat's work queue on a real closed bus (issue 18): work put on it
// while nobody holds the seat is kept, taken by the next holder once, and
// by nobody else: another running module on the same node is refused.
// Fails when the queue is not asserted, does not keep work, hands it out
// twice, or the grant reaches a module that does not hold the seat.
func TestASeatsWorkWaitsForItsHolder(t *testing.T) {
	t.Parallel() // its own bus and homes; long and partly waiting: beside the others
	ctx := context.Background()
	m := newTrustMesh(t, true)
	_, err := m.h.Nodes.Enroll(ctx, wire.EnrollRequest{CommandID: wire.NewCommandID(), Name: "box"})
	m.must(err)
	for _, doc := range []string{
		`{"module":"builder","claims":["builder"],"run":{"command":"/bin/true"}}`,
		`{"module":"other","run":{"command":"/bin/true"}}`,
	} {
		_, err := m.h.Modules.RegisterModule(ctx, wire.RegisterRequest{CommandID: wire.NewCommandID(), File: "m.json", Manifest: doc})
		m.must(err)
	}
	// Nobody holds the seat yet: the work is kept.
	op, err := nats.Connect(m.srv.ClientURL(), operatorOptions(t, m.home)...)
	m.must(err)
	defer op.Close()
	ojs, err := jetstream.New(op)
	m.must(err)
	if _, err := ojs.Publish(ctx, events.SeatWork("builder"), []byte("build v2")); err != nil {
		t.Fatalf("putting work on the seat's queue: %v", err)
	}
	for _, mod := range []string{"builder", "other"} {
		_, err := m.h.Nodes.Assign(ctx, wire.AssignRequest{CommandID: wire.NewCommandID(), Node: "box", Module: mod})
		m.must(err)
	}

	take := func(module string) (string, error) {
		t.Helper()
		nc, _, err := m.connectModule("box", module, nil, nil)
		if err != nil {
			return "", err
		}
		return takeWork(ctx, nc)
	}
	if got, err := take("other"); err == nil {
		t.Fatalf("a module that does not hold the seat took %q from its queue", got)
	}
	if got, err := take("builder"); err != nil || got != "build v2" {
		t.Fatalf("the holder taking the work kept for it: %q %v", got, err)
	}
	if got, err := take("builder"); err != nil || got != "" {
		t.Fatalf("the work was handed out twice: %q %v", got, fmt.Sprint(err))
	}
}
