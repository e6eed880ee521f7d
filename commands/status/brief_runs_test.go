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

// A brief status decodes its rows in runs into two arenas in turn, each
// written again two runs later (rows.EachRun): what its table keeps of a
// row must be its own. More nodes than two runs, each refused for a
// reason of its own (a string of the row's): every line of the table
// names its node and its node's reason, as the whole answer does. Fails
// when the table keeps a detail that is the row's string, which a later
// run writes over.
func TestABriefStatusKeepsEachRowsWordsPastItsRun(t *testing.T) {
	ctx := context.Background()
	nodes := 2*rows.Run + 100
	name := func(i int) string { return fmt.Sprintf("web-%05d", i) }
	bm, h, _ := sentMesh(t, nodes, name)
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

// A rollout's progress counts the active nodes of its waves and those of
// them that hold its build and applied what they would be sent now, read
// in the same pass as every node's state: a retired node and a name never
// enrolled are not counted, a refused or waiting one is counted and not
// applied, a node outside the waves is not counted.
func TestARolloutsProgressCountsItsWavesActiveAndApplied(t *testing.T) {
	ctx := context.Background()
	const nodes = 6
	name := func(i int) string { return fmt.Sprintf("web-%d", i) }
	bm, h, build := sentMesh(t, nodes, name)
	for i := range nodes {
		row, _, err := bm.Proj.Node(name(i))
		if err != nil || row.LastSent == nil {
			t.Fatalf("%s was not sent: %v", name(i), err)
		}
		switch i {
		case 0, 1, 4, 5:
			bm.Report(name(i), events.DeclarationApplied{Node: name(i), Sequence: row.LastSent.Sequence, Digest: row.LastSent.Digest})
		case 2:
			bm.Report(name(i), events.DeclarationRefused{Node: name(i), Sequence: row.LastSent.Sequence, Digest: row.LastSent.Digest, Reason: "no"})
		} // web-3 waits
	}
	bm.Publish(events.NodeAggregate(name(4)), events.NodeRetired{Name: name(4)})
	bm.Publish(events.RolloutAggregate("r1"), events.RolloutStarted{ID: "r1", Module: "m", Build: build,
		Waves: []events.RolloutWave{{Name: "all", Nodes: []string{name(0), name(1), name(2), name(3), name(4), "web-never"}}}})
	bm.CaughtUp()
	for _, brief := range []bool{true, false} {
		s, err := h.Status(ctx, wire.StatusRequest{Brief: brief})
		if err != nil || len(s.Rollouts) != 1 {
			t.Fatalf("brief %v: status: %v, %d rollouts, want 1", brief, err, len(s.Rollouts))
		}
		if p := s.Rollouts[0]; p.Total != 4 || p.Applied != 2 {
			t.Fatalf("brief %v: rollout progress %d of %d, want 2 of 4 (web-0 and web-1 applied; web-2 refused, web-3 waiting; web-4 retired and web-never not counted)", brief, p.Applied, p.Total)
		}
	}
}

// sentMesh is a mesh of nodes named by name, each with its report key and
// module m (of one file) assigned, all pushed to and folded; it answers
// m's build too.
func sentMesh(t *testing.T, nodes int, name func(int) string) (*coretest.Mesh, *Service, string) {
	t.Helper()
	bm := coretest.New(t, true)
	m, _ := manifest.Parse([]byte(`{"module":"m","resources":[{"kind":"file","path":"/etc/m.conf","mode":"0644","template":"node = {{.Node.Name}}\n"}]}`))
	bm.Publish(events.ModuleAggregate("m"), events.ModuleRegistered{Module: "m", Build: m.Build(), Manifest: m.Canonical()})
	for i := range nodes {
		bm.Publish(events.NodeAggregate(name(i)), events.NodeEnrolled{Name: name(i), Capabilities: []string{}, Labels: map[string]string{}})
		bm.Report(name(i), events.ReportKeyRecorded{Node: name(i), Key: bm.Agent.PublicKey()})
		bm.Publish(events.NodeAggregate(name(i)), events.ModuleAssigned{Node: name(i), Module: "m", Build: m.Build(), Settings: map[string]string{}})
	}
	h := Over(bm.Fold())
	pushAll(t, h, nodes)
	bm.CaughtUp()
	return bm, h, m.Build()
}
