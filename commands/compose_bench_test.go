package commands

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/meshctl/mesh/embedded/embeddedtest"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/events/store"
	"github.com/meshctl/mesh/manifest"
	"github.com/meshctl/mesh/projections"
	"github.com/nats-io/nats.go/jetstream"
)

// BenchmarkComposeFromReadModels composes every node of a mesh of 10,000
// nodes with 5 modules each, reading the read models (Pebble) into the
// composition's input once per round, as a push will. Target: 20,000 nodes a
// second on one core (run with -cpu 1).
func BenchmarkComposeFromReadModels(b *testing.B) {
	ctx := context.Background()
	nc := embeddedtest.Conn(b, embeddedtest.Server(b))
	st, _, err := store.Open(ctx, nc, store.StreamConfig{})
	if err != nil {
		b.Fatal(err)
	}
	js, _ := jetstream.New(nc)
	publish := func(agg events.AggregateID, ev events.Event) {
		data, _ := events.Encode(agg, "c", 0, time.Now(), ev)
		if _, err := js.PublishAsync(agg.Subject(ev.EventType()), data); err != nil {
			b.Fatal(err)
		}
	}
	var builds []string
	for i := range 5 {
		m, err := manifest.Parse([]byte(fmt.Sprintf(`{"module":"m%d","requires":["linux"],"settings":{"port":{"default":"80%d"}},
		  "resources":[{"kind":"directory","path":"/etc/m%d","mode":"0755"},
		    {"kind":"file","path":"/etc/m%d/m.conf","mode":"0644","template":"node = {{.Node.Name}}\nport = {{.Settings.port}}\n"}]}`, i, i, i, i)))
		if err != nil {
			b.Fatal(err)
		}
		publish(events.ModuleAggregate(m.Module), events.ModuleRegistered{Module: m.Module, Build: m.Build(), Manifest: m.Canonical()})
		builds = append(builds, m.Build())
	}
	const nodes = 10_000
	for i := range nodes {
		name := fmt.Sprintf("web-%d", i)
		agg := events.NodeAggregate(name)
		publish(agg, events.NodeEnrolled{Name: name, Capabilities: []string{"linux"}, Labels: map[string]string{"zone": "a"}})
		for j, build := range builds {
			publish(agg, events.ModuleAssigned{Node: name, Module: fmt.Sprintf("m%d", j), Build: build, Settings: map[string]string{}})
		}
	}
	<-js.PublishAsyncComplete()
	proj, _, err := projections.Open(ctx, projections.Options{Dir: b.TempDir(), Store: st})
	if err != nil {
		b.Fatal(err)
	}
	defer proj.Close()
	proj.Start()
	state, _ := st.State(ctx)
	if err := proj.WaitFor(ctx, state.LastSeq); err != nil {
		b.Fatal(err)
	}
	h := &Handlers{Store: st, Proj: proj, Now: time.Now, Log: slog.New(slog.DiscardHandler), Mesh: "mesh"}
	var load time.Duration
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		w, _, err := h.world()
		if err != nil {
			b.Fatal(err)
		}
		load += time.Since(t0)
		for _, n := range w.Nodes() {
			if r := w.Compose(n); !r.Composable() {
				b.Fatal(r.Reason())
			}
		}
	}
	b.ReportMetric(float64(b.N*nodes)/b.Elapsed().Seconds(), "nodes/s")
	b.ReportMetric(load.Seconds()/b.Elapsed().Seconds(), "load-share")
}
