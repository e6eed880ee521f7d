package world_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/meshctl/mesh/commands"
	"github.com/meshctl/mesh/commands/core/coretest"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/manifest"
)

// BenchmarkComposeFromReadModels composes every node of a mesh of 10,000
// nodes with 5 modules each, reading the read models (Pebble) into the
// composition's input once per round, as a push will. Target: 20,000 nodes a
// second on one core (run with -cpu 1).
func BenchmarkComposeFromReadModels(b *testing.B) {
	bm := coretest.New(b, false)
	publish := bm.Publish
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
	h := commands.NewServices(bm.Fold(), nil, nil)
	var load time.Duration
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		w, err := h.World.World()
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
