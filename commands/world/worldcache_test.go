package world

import (
	"context"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/meshctl/mesh/commands/core"
	"github.com/meshctl/mesh/compose"
	"github.com/meshctl/mesh/declaration"
	"github.com/meshctl/mesh/embedded/embeddedtest"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/events/store"
	"github.com/meshctl/mesh/manifest"
	"github.com/meshctl/mesh/projections"
)

// A push reuses the world it indexed while the composition version has not
// moved, and never once it has: a world kept past an assignment would send
// every node what it was composed to before it.
func TestTheWorldIsKeptOnlyWhileCompositionHasNotMoved(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, _, err := store.Open(ctx, embeddedtest.Conn(t, embeddedtest.Server(t)), store.StreamConfig{})
	if err != nil {
		t.Fatal(err)
	}
	keys, err := declaration.NewKeyring(orderKey)
	if err != nil {
		t.Fatal(err)
	}
	st.MAC = keys.LogMAC()
	proj, _, err := projections.Open(ctx, projections.Options{Dir: "p", FS: vfs.NewMem(), Store: st, Keys: keys})
	if err != nil {
		t.Fatal(err)
	}
	defer proj.Close()
	proj.Start()
	data, err := os.ReadFile("../../examples/motd.json")
	if err != nil {
		t.Fatal(err)
	}
	m, err := manifest.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	versions := map[events.AggregateID]uint64{}
	appendAll := func(evs ...events.Event) {
		t.Helper()
		var last uint64
		for i, ev := range evs {
			agg := events.NodeAggregate("web-1")
			if r, ok := ev.(events.ModuleRegistered); ok {
				agg = events.ModuleAggregate(r.Module)
			}
			if last, err = st.Append(ctx, agg, versions[agg], "c"+time.Now().Format("150405.000000000")+string(rune('a'+i)), ev); err != nil {
				t.Fatal(err)
			}
			versions[agg] = last
		}
		wctx, cancel := context.WithTimeout(ctx, embeddedtest.Settle)
		defer cancel()
		if err := proj.WaitFor(wctx, last); err != nil {
			t.Fatal(err)
		}
	}
	assign := func(message string) events.Event {
		return events.ModuleAssigned{Node: "web-1", Module: "motd", Build: m.Build(), Settings: map[string]string{"message": message}}
	}
	appendAll(events.ModuleRegistered{Module: "motd", Build: m.Build(), Manifest: m.Canonical()},
		events.NodeEnrolled{Name: "web-1", Capabilities: []string{}, Labels: map[string]string{}}, assign("hello"))
	c := New(&core.Core{Self: core.Self{Store: st, Log: slog.New(slog.DiscardHandler), Mesh: "mesh", Keys: keys}, Proj: proj, Now: time.Now})
	worldAt := func() *compose.World {
		t.Helper()
		var w *compose.World
		if err := proj.Read(func(v *projections.View) (err error) { w, err = c.WorldAt(v); return err }); err != nil {
			t.Fatal(err)
		}
		return w
	}
	first := worldAt()
	if again := worldAt(); again != first {
		t.Fatal("the world was indexed again though composition had not moved")
	}
	appendAll(assign("goodbye"))
	moved := worldAt()
	if moved == first {
		t.Fatal("the world indexed before an assignment was kept after it")
	}
	if got := string(moved.Compose("web-1").Bytes); !strings.Contains(got, "goodbye") {
		t.Fatalf("the world after the assignment composes %s", got)
	}
}
