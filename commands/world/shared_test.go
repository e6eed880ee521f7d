package world

import (
	"reflect"
	"testing"

	"github.com/meshctl/mesh/commands/core/coretest"
	"github.com/meshctl/mesh/compose"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/projections"
)

// Composition's input holds one list of capabilities and one map of labels
// for the nodes that have equal ones, and its own for a node whose differ:
// a map a node was 30 MB of the input a controller keeps at 100,000 nodes
// (issue 34's 700 MiB bound).
func TestTheInputSharesEqualLabelsAndCapabilities(t *testing.T) {
	t.Parallel()
	mesh := coretest.New(t, false)
	for _, n := range []string{"web-1", "web-2", "web-3"} {
		mesh.Publish(events.NodeAggregate(n), events.NodeEnrolled{Name: n, Capabilities: []string{"linux"}, Labels: map[string]string{"zone": "eu-1", "tier": "web"}})
	}
	mesh.Publish(events.NodeAggregate("db-1"), events.NodeEnrolled{Name: "db-1", Capabilities: []string{"linux", "gpu"}, Labels: map[string]string{"zone": "eu-1"}})
	c := New(mesh.Fold())
	var in compose.Input
	if err := mesh.Proj.Read(func(v *projections.View) (err error) { in, err = c.Input(v); return err }); err != nil {
		t.Fatal(err)
	}
	byName := map[string]compose.Node{}
	for _, n := range in.Nodes {
		byName[n.Name] = n
	}
	same := func(a, b any) bool { return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer() }
	for _, n := range []string{"web-2", "web-3"} {
		if !same(byName[n].Labels, byName["web-1"].Labels) || !same(byName[n].Capabilities, byName["web-1"].Capabilities) {
			t.Errorf("%s holds its own labels or capabilities, equal to web-1's", n)
		}
	}
	db := byName["db-1"]
	if same(db.Labels, byName["web-1"].Labels) || same(db.Capabilities, byName["web-1"].Capabilities) {
		t.Error("db-1 shares web-1's labels or capabilities, which differ from its own")
	}
	if db.Labels["zone"] != "eu-1" || len(db.Labels) != 1 || len(db.Capabilities) != 2 {
		t.Errorf("db-1's labels %v and capabilities %v are not its own", db.Labels, db.Capabilities)
	}
}
