package push_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/meshctl/mesh/commands/core"
	"github.com/meshctl/mesh/commands/push"
	"github.com/meshctl/mesh/declaration"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/manifest"
	"github.com/meshctl/mesh/projections"
	"github.com/meshctl/mesh/wire"
	"github.com/nats-io/nats.go/jetstream"
)

// A push in windows sends exactly what one window would: each node its own
// composition, numbered after and chained to its own last send, appended
// to its own aggregate at its own version. Two pushes of 11 nodes in
// windows of 3 (the last window short), each send checked against the log
// and a fresh composition, all in the first round. It fails if a window's rows
// and names fall out of step.
func TestAPushInWindowsSendsEachNodeItsOwn(t *testing.T) {
	defer push.SetWindow(3)()
	ctx := context.Background()
	bm := newBenchMesh(t, true)
	m, err := manifest.Parse([]byte(`{"module":"app","settings":{"port":{"default":"8080"}},"resources":[
	  {"kind":"file","path":"/etc/app.conf","mode":"0644","template":"node = {{.Node.Name}}\\nport = {{.Settings.port}}\\n"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	bm.Publish(events.ModuleAggregate("app"), events.ModuleRegistered{Module: "app", Build: m.Build(), Manifest: m.Canonical()})
	for i := range 11 {
		name := fmt.Sprintf("web-%02d", i)
		bm.Publish(events.NodeAggregate(name), events.NodeEnrolled{Name: name, Capabilities: []string{}, Labels: map[string]string{}})
		bm.Publish(events.NodeAggregate(name), events.ModuleAssigned{Node: name, Module: "app", Build: m.Build(), Settings: map[string]string{"port": fmt.Sprint(9000 + i)}})
	}
	h := bm.fold()
	// Nodes a push already reached: their numbers run ahead of the others'.
	if r, err := h.Push.Push(ctx, wire.PushRequest{CommandID: wire.NewCommandID(), Nodes: []string{"web-00", "web-04", "web-08"}}); err != nil || len(r.Sent) != 3 {
		t.Fatalf("the first push: %v, %+v", err, r)
	}
	w, err := h.World.World()
	if err != nil {
		t.Fatal(err)
	}
	for push := range 2 {
		before := map[string]projections.Node{}
		if err := h.Status.Proj.Read(func(v *projections.View) error {
			nodes, err := v.Nodes()
			for _, n := range nodes {
				before[n.Name] = n
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
		cmd := wire.NewCommandID()
		r, err := h.Push.Push(ctx, wire.PushRequest{CommandID: cmd})
		if err != nil || len(r.Sent) != 11 || len(r.Unsent) != 0 {
			t.Fatalf("push %d: %v, %d sent, unsent %+v", push+1, err, len(r.Sent), r.Unsent)
		}
		for _, p := range r.Sent {
			msg, err := bm.Store.Get(ctx, p.StreamSeq)
			if err != nil {
				t.Fatal(err)
			}
			// In the first round: a send whose row was not its own
			// conflicts, and lands in a later one (its id says which).
			if id := msg.Header.Get(jetstream.MsgIDHeader); !strings.HasPrefix(id, core.PerNode(cmd, p.Node, 0)+"/") {
				t.Fatalf("push %d: %s was sent as %q, not in the push's first round", push+1, p.Node, id)
			}
			_, ev, err := events.Decode(msg.Data)
			if err != nil {
				t.Fatal(err)
			}
			sent := ev.(events.DeclarationSent)
			var d declaration.Declaration
			if err := json.Unmarshal(sent.Declaration, &d); err != nil {
				t.Fatal(err)
			}
			row := before[p.Node]
			wantSeq, wantPrevious := uint64(1), ""
			if row.LastSent != nil {
				wantSeq, wantPrevious = row.LastSent.Sequence+1, row.LastSent.Digest
			}
			if msg.Subject != events.NodeAggregate(p.Node).Subject(sent.EventType()) || sent.Node != p.Node || d.Node != p.Node {
				t.Fatalf("push %d: the send answered for %s is on %s, for %s, declaring %s", push+1, p.Node, msg.Subject, sent.Node, d.Node)
			}
			if d.Sequence != wantSeq || p.Sequence != wantSeq || d.Previous != wantPrevious {
				t.Fatalf("push %d: %s was sent sequence %d after %q; its row said %d after %q", push+1, p.Node, d.Sequence, d.Previous, wantSeq, wantPrevious)
			}
			if got, want := sent.ContentDigest, w.Compose(p.Node).Digest; got != want {
				t.Fatalf("push %d: %s was sent content %s; it composes to %s", push+1, p.Node, got, want)
			}
		}
	}
}
