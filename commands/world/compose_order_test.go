package world

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/meshctl/mesh/commands/core"
	"github.com/meshctl/mesh/declaration"
	"github.com/meshctl/mesh/embedded/embeddedtest"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/events/store"
	"github.com/meshctl/mesh/manifest"
	"github.com/meshctl/mesh/projections"
	"github.com/nats-io/nkeys"
)

// history is the events of several aggregates, each in its own order. Events
// of one aggregate keep their order (that is what the aggregate decided);
// events of different aggregates are independent and may arrive interleaved
// in any way.
func history(t *testing.T) map[events.AggregateID][]events.Event {
	t.Helper()
	reg := func(file string) events.Event {
		data, err := os.ReadFile("../../examples/" + file)
		if err != nil {
			t.Fatal(err)
		}
		m, err := manifest.Parse(data)
		if err != nil {
			t.Fatal(err)
		}
		return events.ModuleRegistered{Module: m.Module, Build: m.Build(), Manifest: m.Canonical()}
	}
	pg, app := reg("postgres.json"), reg("app.json")
	pgBuild, appBuild := pg.(events.ModuleRegistered).Build, app.(events.ModuleRegistered).Build
	assign := func(node, module, build string, settings map[string]string) events.Event {
		return events.ModuleAssigned{Node: node, Module: module, Build: build, Settings: settings}
	}
	enroll := func(name string, caps ...string) events.Event {
		return events.NodeEnrolled{Name: name, Capabilities: caps, Labels: map[string]string{"zone": "z-" + name}}
	}
	return map[events.AggregateID][]events.Event{
		events.ModuleAggregate("postgres"): {pg},
		events.ModuleAggregate("app"):      {app},
		events.NodeAggregate("db-1"): {enroll("db-1", "linux"),
			assign("db-1", "postgres", pgBuild, map[string]string{"password": "a"}),
			assign("db-1", "postgres", pgBuild, map[string]string{"password": "b", "port": "6543"})},
		events.NodeAggregate("web-1"): {enroll("web-1", "linux"), assign("web-1", "app", appBuild, map[string]string{"workers": "8"})},
		events.NodeAggregate("web-2"): {enroll("web-2", "linux"), assign("web-2", "app", appBuild, map[string]string{}),
			events.ModuleUnassigned{Node: "web-2", Module: "app"}, assign("web-2", "app", appBuild, map[string]string{"workers": "2"})},
		// A second postgres, in web-2's zone: web-2 receives it, web-1
		// (sharing no label with either) the first by name, db-1; and
		// each provider lists only its own consumers (issue 31).
		events.NodeAggregate("db-2"): {events.NodeEnrolled{Name: "db-2", Capabilities: []string{"linux"}, Labels: map[string]string{"zone": "z-web-2"}},
			assign("db-2", "postgres", pgBuild, map[string]string{"password": "c"})},
		events.NodeAggregate("bare"):  {enroll("bare"), assign("bare", "app", appBuild, map[string]string{})},
		events.NodeAggregate("old-1"): {enroll("old-1", "linux"), assign("old-1", "postgres", pgBuild, map[string]string{"password": "x"}), events.NodeRetired{Name: "old-1"}},
	}
}

// orderKey is the controller key of every interleaving.
var orderKey, _ = nkeys.CreateAccount()

// interleave appends every aggregate's events in one random interleaving,
// each aggregate's own order kept, into a fresh stream, folds it, and
// composes every node.
func interleave(t *testing.T, rng *rand.Rand, h map[events.AggregateID][]events.Event) map[string]string {
	t.Helper()
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
	var pending []events.AggregateID
	next := map[events.AggregateID]int{}
	version := map[events.AggregateID]uint64{}
	for id, evs := range h {
		for range evs {
			pending = append(pending, id)
		}
	}
	rng.Shuffle(len(pending), func(i, j int) { pending[i], pending[j] = pending[j], pending[i] })
	var last uint64
	for i, id := range pending {
		ev := h[id][next[id]]
		next[id]++
		if last, err = st.Append(ctx, id, version[id], fmt.Sprintf("c%d", i), ev); err != nil {
			t.Fatal(err)
		}
		version[id] = last
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := proj.WaitFor(wctx, last); err != nil {
		t.Fatal(err)
	}
	// The same key in every interleaving: sealed files' keyed digests and
	// minted credentials are the key's, and must not differ by order.
	hd := New(&core.Core{Self: core.Self{Store: st, Log: slog.New(slog.DiscardHandler), Mesh: "mesh", Keys: keys}, Proj: proj, Now: time.Now})
	w, err := hd.World()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, n := range w.Nodes() {
		r := w.Compose(n)
		out[n] = fmt.Sprintf("%s|%s|%v|%v", r.Bytes, r.Reason(), r.LeftOut, r.Chosen)
	}
	return out
}

// Composition depends only on what the read models hold, never on the order
// in which independent events arrived.
func TestCompositionDoesNotDependOnEventOrder(t *testing.T) {
	h := history(t)
	rng := rand.New(rand.NewPCG(2026, 12))
	want := interleave(t, rng, h)
	if len(want) != 5 || want["old-1"] != "" {
		t.Fatalf("composed %d nodes (retired old-1 must not be one): %v", len(want), want)
	}
	// The final state, not a prefix of it: the reassigned port and settings.
	if !strings.Contains(want["web-1"], `database = db-1:6543`) || !strings.Contains(want["web-2"], `workers = 2`) ||
		!strings.Contains(want["web-2"], `database = db-2:5432`) || !strings.Contains(want["web-2"], "closest by labels: shares zone=z-web-2") ||
		!strings.Contains(want["bare"], "app needs linux, bare has none") {
		t.Fatalf("composition does not reflect the history: %v", want)
	}
	for i := range 8 {
		got := interleave(t, rng, h)
		for n, b := range want {
			if got[n] != b {
				t.Fatalf("order %d: %s composed differently:\n%s\n%s", i, n, b, got[n])
			}
		}
	}
}
