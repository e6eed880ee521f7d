package world

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/meshctl/mesh/commands/core/coretest"
	"github.com/meshctl/mesh/compose"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/manifest"
	"github.com/meshctl/mesh/projections"
)

// A push reuses the world it indexed while the composition version has not
// moved, and never once it has: a world kept past an assignment would send
// every node what it was composed to before it.
func TestTheWorldIsKeptOnlyWhileCompositionHasNotMoved(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("../../examples/motd.json")
	if err != nil {
		t.Fatal(err)
	}
	m, err := manifest.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	assign := func(message string) events.Event {
		return events.ModuleAssigned{Node: "web-1", Module: "motd", Build: m.Build(), Settings: map[string]string{"message": message}}
	}
	mesh := coretest.New(t, false)
	mesh.Publish(events.ModuleAggregate("motd"), events.ModuleRegistered{Module: "motd", Build: m.Build(), Manifest: m.Canonical()})
	mesh.Publish(events.NodeAggregate("web-1"), events.NodeEnrolled{Name: "web-1", Capabilities: []string{}, Labels: map[string]string{}})
	mesh.Publish(events.NodeAggregate("web-1"), assign("hello"))
	c := New(mesh.Fold())
	worldAt := func() *compose.World {
		t.Helper()
		var w *compose.World
		if err := mesh.Proj.Read(func(v *projections.View) error { at, err := c.At(v); w = at.World; return err }); err != nil {
			t.Fatal(err)
		}
		return w
	}
	first := worldAt()
	if again := worldAt(); again != first {
		t.Fatal("the world was indexed again though composition had not moved")
	}
	mesh.Publish(events.NodeAggregate("web-1"), assign("goodbye"))
	<-mesh.JS.PublishAsyncComplete()
	ctx := context.Background()
	state, err := mesh.Store.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := mesh.Proj.WaitFor(ctx, state.LastSeq); err != nil {
		t.Fatal(err)
	}
	moved := worldAt()
	if moved == first {
		t.Fatal("the world indexed before an assignment was kept after it")
	}
	if got := string(moved.Compose("web-1").Bytes); !strings.Contains(got, "goodbye") {
		t.Fatalf("the world after the assignment composes %s", got)
	}
}
