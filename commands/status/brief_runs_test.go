package status

import (
	"context"
	"fmt"
	"testing"

	"github.com/meshctl/mesh/commands/core/coretest"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/manifest"
	"github.com/meshctl/mesh/projections/rows"
	"github.com/meshctl/mesh/wire"
)

// A brief status decodes its rows in runs that share one arena, written
// again run after run (rows.EachRun): what its table keeps of a row must
// be its own. More nodes than a run, each refused for a reason of its
// own (a string of the row's): every line of the table names its node
// and its node's reason, as the whole answer does. Fails when the table
// keeps a detail that is the row's string, which the next run writes
// over.
func TestABriefStatusKeepsEachRowsWordsPastItsRun(t *testing.T) {
	ctx := context.Background()
	bm := coretest.New(t, true)
	m, _ := manifest.Parse([]byte(`{"module":"m","resources":[{"kind":"file","path":"/etc/m.conf","mode":"0644","template":"node = {{.Node.Name}}\n"}]}`))
	bm.Publish(events.ModuleAggregate("m"), events.ModuleRegistered{Module: "m", Build: m.Build(), Manifest: m.Canonical()})
	nodes := rows.Run + 100
	name := func(i int) string { return fmt.Sprintf("web-%05d", i) }
	for i := range nodes {
		bm.Publish(events.NodeAggregate(name(i)), events.NodeEnrolled{Name: name(i), Capabilities: []string{}, Labels: map[string]string{}})
		bm.Report(name(i), events.ReportKeyRecorded{Node: name(i), Key: bm.Agent.PublicKey()})
		bm.Publish(events.NodeAggregate(name(i)), events.ModuleAssigned{Node: name(i), Module: "m", Build: m.Build(), Settings: map[string]string{}})
	}
	h := Over(bm.Fold())
	pushAll(t, h, nodes)
	bm.CaughtUp()
	reason := func(i int) string { return fmt.Sprintf("policy forbids %s, refused by its own agent", name(i)) }
	for i := range nodes {
		row, _, err := bm.Proj.Node(name(i))
		if err != nil || row.LastSent == nil {
			t.Fatalf("%s was not sent: %v", name(i), err)
		}
		bm.Report(name(i), events.DeclarationRefused{Node: name(i), Sequence: row.LastSent.Sequence, Digest: row.LastSent.Digest, Reason: reason(i)})
	}
	bm.CaughtUp()
	brief, err := h.Status(ctx, wire.StatusRequest{Brief: true})
	if err != nil || brief.Table == nil || brief.Table.Len() != nodes {
		t.Fatalf("brief status: %v, %d lines, want %d", err, brief.Table.Len(), nodes)
	}
	whole, err := h.Status(ctx, wire.StatusRequest{})
	if err != nil || len(whole.Nodes) != nodes {
		t.Fatalf("whole status: %v, %d nodes, want %d", err, len(whole.Nodes), nodes)
	}
	for i := range nodes {
		line, node := brief.Table.Row(i), whole.Nodes[i]
		if line.Name != name(i) || line.State != wire.StateRefused || line.Detail != reason(i) {
			t.Fatalf("line %d of the brief table: %s %s %q, want %s refused %q", i, line.Name, line.State, line.Detail, name(i), reason(i))
		}
		if node.Name != name(i) || node.Detail != reason(i) || node.Sequence != line.Sequence {
			t.Fatalf("node %d of the whole answer: %s %q seq %d, the brief line seq %d", i, node.Name, node.Detail, node.Sequence, line.Sequence)
		}
	}
}
