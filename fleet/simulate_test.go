package fleet

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/meshctl/mesh/agent"
	"github.com/meshctl/mesh/commands"
	"github.com/meshctl/mesh/embedded"
	"github.com/meshctl/mesh/embedded/embeddedtest"
	"github.com/meshctl/mesh/wire"
)

// A simulated fleet whose reports overflow its window of unacknowledged
// publishes many times over still answers every declaration: a report
// waits for room rather than being dropped. Fails when a full window loses
// a report (the await then never completes) or a report is not believed.
func TestASimulatedFleetWaitsForRoom(t *testing.T) {
	window, stall := asyncWindow, stallWait
	asyncWindow, stallWait = 8, time.Microsecond
	t.Cleanup(func() { asyncWindow, stallWait = window, stall })
	ctx := context.Background()
	const n = 300
	srv, h, joins := simulatedMesh(t, n)
	f, err := Simulate(ctx, embeddedtest.Conn(t, srv), joins)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Stop()
	r, err := h.Push.Push(ctx, wire.PushRequest{CommandID: wire.NewCommandID()})
	if err != nil || len(r.Sent) != n {
		t.Fatalf("push: %v, %d of %d sent", err, len(r.Sent), n)
	}
	want := map[string]uint64{}
	for _, s := range r.Sent {
		want[s.Node] = s.Sequence
	}
	wctx, cancel := context.WithTimeout(ctx, embeddedtest.Settle)
	defer cancel()
	got, err := f.Await(wctx, want)
	if err != nil || got.Applied != n {
		t.Fatalf("%d of %d simulated reports acknowledged (%v)", got.Applied, n, err)
	}
	if warnings, first := f.Warnings(); warnings > 0 {
		t.Fatalf("%d warning(s), the first: %s", warnings, first)
	}
	embeddedtest.Eventually(t, "status to believe every simulated report", func() bool {
		s, err := h.Status.Status(ctx, wire.StatusRequest{})
		return err == nil && s.Well && len(s.Nodes) == n
	})
}

// simulatedMesh is a bus and a controller with n nodes (sim-000 on), each
// assigned motd, and the join strings a simulated fleet plays them by.
func simulatedMesh(t *testing.T, n int) (*embedded.Server, *commands.Controller, []agent.Join) {
	t.Helper()
	ctx := context.Background()
	srv := embeddedtest.Server(t)
	ctrl, err := commands.StartController(ctx, embeddedtest.Conn(t, srv), commands.ControllerConfig{Home: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ctrl.Close() })
	h := ctrl
	var enrol wire.EnrollBatchRequest
	var names []string
	for i := range n {
		name := fmt.Sprintf("sim-%03d", i)
		names = append(names, name)
		enrol.Nodes = append(enrol.Nodes, wire.EnrollRequest{Name: name, Capabilities: []string{"linux"}})
	}
	enrol.CommandID = wire.NewCommandID()
	if _, err := h.Nodes.EnrollBatch(ctx, enrol); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Modules.RegisterModule(ctx, wire.RegisterRequest{CommandID: wire.NewCommandID(), File: "motd.json",
		Manifest: `{"module":"motd","resources":[{"kind":"file","path":"/etc/motd","mode":"0644","template":"hello {{.Node.Name}}\n"}]}`}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Nodes.AssignBatch(ctx, wire.AssignBatchRequest{CommandID: wire.NewCommandID(), Module: "motd", Nodes: names}); err != nil {
		t.Fatal(err)
	}
	var joins []agent.Join
	for _, name := range names {
		id, err := h.Access.LegacyIdentity(name)
		if err != nil {
			t.Fatal(err)
		}
		joins = append(joins, agent.Join{Mesh: id.Mesh, Bus: srv.ClientURL(), Node: id.Node, Key: id.Key, Seed: id.Seed})
	}
	return srv, h, joins
}

// A simulated fleet whose connection to the bus drops says so: what the
// stream republished meanwhile was not heard (an agent reads its newest
// declaration back, this harness does not), and a push then never all
// reported must not wait in silence. Fails when the drop goes unsaid.
func TestASimulatedFleetSaysWhenItsConnectionDropped(t *testing.T) {
	ctx := context.Background()
	srv, _, joins := simulatedMesh(t, 3)
	nc, cut := embeddedtest.ConnCut(t, srv)
	f, err := Simulate(ctx, nc, joins)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Stop()
	if n, first := f.Warnings(); n > 0 {
		t.Fatalf("%d warning(s) before any drop, the first: %s", n, first)
	}
	cut.Drop()
	cut.Resume()
	embeddedtest.Eventually(t, "the fleet to say its connection dropped", func() bool {
		n, first := f.Warnings()
		return n > 0 && strings.Contains(first, "connection to the bus dropped")
	})
}
