package status

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/meshctl/mesh/commands/core/coretest"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/manifest"
	"github.com/meshctl/mesh/wire"
)

// Status reads node rows from the live fold's memory of them
// (projections/noderows.go); a status of the mesh as it is now, asked as
// of now, reads them from the Pebble of a fold made afresh (time travel
// keeps no such memory). The two say the same of every node after each
// thing that moves a node's row or its would-send: a push, reports, a
// label change, a retirement, an assignment; and so does a controller
// started afresh on the same stream. Fails when the memory and Pebble
// disagree, or when the memory is of another moment than the rest of
// the view status reads.
func TestStatusFromMemoryAgreesWithAFreshFold(t *testing.T) {
	ctx := context.Background()
	bm := coretest.New(t, true)
	m, _ := manifest.Parse([]byte(`{"module":"m","resources":[{"kind":"file","path":"/etc/m.conf","mode":"0644","template":"node = {{.Node.Name}} {{.Node.Labels.zone}}\n"}]}`))
	bm.Publish(events.ModuleAggregate("m"), events.ModuleRegistered{Module: "m", Build: m.Build(), Manifest: m.Canonical()})
	const nodes = 40
	for i := range nodes {
		name := fmt.Sprintf("web-%d", i)
		bm.Publish(events.NodeAggregate(name), events.NodeEnrolled{Name: name, Capabilities: []string{}, Labels: map[string]string{"zone": "a"}})
		bm.Report(name, events.ReportKeyRecorded{Node: name, Key: bm.Agent.PublicKey()})
		if i%4 != 3 {
			bm.Publish(events.NodeAggregate(name), events.ModuleAssigned{Node: name, Module: "m", Build: m.Build(), Settings: map[string]string{}})
		}
	}
	h := Over(bm.Fold())
	folded := bm.CaughtUp
	agree := func(when string, live *Service) {
		t.Helper()
		now, err := live.Status(ctx, wire.StatusRequest{})
		if err != nil {
			t.Fatal(err)
		}
		fresh, err := h.Status(ctx, wire.StatusRequest{AsOf: time.Now().Add(time.Minute)})
		if err != nil {
			t.Fatal(err)
		}
		if len(now.Nodes) == 0 {
			t.Fatalf("%s: no node in status", when)
		}
		if diff := cmp.Diff(fresh.Nodes, now.Nodes, cmpopts.IgnoreFields(wire.NodeStatus{}, "LastHeard")); diff != "" {
			t.Fatalf("%s: status from the fold's memory differs from a fresh fold's (-fresh +memory):\n%s", when, diff)
		}
		if fresh.Well != now.Well {
			t.Fatalf("%s: well %v from the memory, %v from a fresh fold", when, now.Well, fresh.Well)
		}
	}
	agree("before any push", h)

	pushSome(t, h)
	folded()
	agree("after a push", h)

	for i := range nodes / 2 {
		name := fmt.Sprintf("web-%d", i)
		row, _, err := bm.Proj.Node(name)
		if err != nil || row.LastSent == nil {
			continue
		}
		if i%3 == 0 {
			bm.Report(name, events.DeclarationFailed{Node: name, Sequence: row.LastSent.Sequence, Digest: row.LastSent.Digest, Failed: []events.ResourceFailure{{Path: "/etc/m.conf", Reason: "no room"}}})
			continue
		}
		bm.Report(name, events.DeclarationApplied{Node: name, Sequence: row.LastSent.Sequence, Digest: row.LastSent.Digest})
	}
	folded()
	agree("after reports", h)

	bm.Publish(events.NodeAggregate("web-1"), events.NodeChanged{Name: "web-1", Capabilities: []string{}, Labels: map[string]string{"zone": "b"}})
	bm.Publish(events.NodeAggregate("web-2"), events.NodeRetired{Name: "web-2"})
	bm.Publish(events.NodeAggregate("web-3"), events.ModuleAssigned{Node: "web-3", Module: "m", Build: m.Build(), Settings: map[string]string{}})
	folded()
	agree("after a label change, a retirement and an assignment", h)
	if s := statusOf(t, h, "web-1"); s.State != wire.StateBehind {
		t.Fatalf("web-1 after its label changed: %+v, want behind", s)
	}

	pushSome(t, h)
	folded()
	agree("after a second push", h)

	// A controller started afresh on the same stream: its memory is
	// filled at its first commit, and until then it reads Pebble.
	again := Over(bm.Fold())
	agree("a controller started afresh", again)
	bm.Publish(events.NodeAggregate("web-5"), events.NodeChanged{Name: "web-5", Capabilities: []string{}, Labels: map[string]string{"zone": "c"}})
	folded()
	agree("a controller started afresh, after a change", again)
}

// pushSome pushes to the whole mesh and fails unless some node was sent
// a declaration.
func pushSome(t *testing.T, h *Service) {
	t.Helper()
	if r, err := h.push.Push(context.Background(), wire.PushRequest{CommandID: wire.NewCommandID()}); err != nil || len(r.Sent) == 0 {
		t.Fatalf("push: %v, %d sent", err, len(r.Sent))
	}
}

// statusOf is one node's line of h's status.
func statusOf(t *testing.T, h *Service, node string) wire.NodeStatus {
	t.Helper()
	s, err := h.Status(context.Background(), wire.StatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range s.Nodes {
		if n.Name == node {
			return n
		}
	}
	t.Fatalf("no %s in status", node)
	return wire.NodeStatus{}
}
