package status

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/meshctl/mesh/commands/core/coretest"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/manifest"
	"github.com/meshctl/mesh/projections"
	"github.com/meshctl/mesh/wire"
)

// BenchmarkStatus answers status over 10,000 pushed nodes (5 modules each),
// beside a raw Pebble scan of the same node rows, in the same run. Targets:
// 100 ms or less end to end; resident memory at 10,000 nodes 200 MiB or less
// (reported as rss-MiB: this process holds the controller and its bus).
func BenchmarkStatus(b *testing.B) {
	ctx := context.Background()
	bm, h, nodes := pushedMesh(b, 5, 10_000)
	proj := bm.Proj
	if _, err := h.Status(ctx, wire.StatusRequest{}); err != nil { // warms the would-send cache, as the push did not
		b.Fatal(err)
	}
	var statusTime, rawTime time.Duration
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		s, err := h.Status(ctx, wire.StatusRequest{})
		if err != nil || len(s.Nodes) != nodes {
			b.Fatalf("status: %v %d", err, len(s.Nodes))
		}
		statusTime += time.Since(t0)
		t1 := time.Now()
		if n := rawScan(b, proj); n != nodes {
			b.Fatalf("raw scan saw %d rows", n)
		}
		rawTime += time.Since(t1)
	}
	b.StopTimer()
	b.ReportMetric(statusTime.Seconds()*1000/float64(b.N), "status-ms")
	b.ReportMetric(rawTime.Seconds()*1000/float64(b.N), "raw-scan-ms")
	b.ReportMetric(statusTime.Seconds()/rawTime.Seconds(), "status/raw")
	b.ReportMetric(rssMiB(), "rss-MiB")
}

// pushedMesh is a mesh of nodes (or MESH_BENCH_NODES), each assigned
// modules modules of one file, folded and pushed to once: what status
// is measured over.
func pushedMesh(b *testing.B, modules, def int) (*coretest.Mesh, *Service, int) {
	bm := coretest.New(b, true)
	var builds []string
	for i := range modules {
		m, _ := manifest.Parse([]byte(fmt.Sprintf(`{"module":"m%d","resources":[{"kind":"file","path":"/etc/m%d.conf","mode":"0644","template":"node = {{.Node.Name}}\n"}]}`, i, i)))
		bm.Publish(events.ModuleAggregate(m.Module), events.ModuleRegistered{Module: m.Module, Build: m.Build(), Manifest: m.Canonical()})
		builds = append(builds, m.Build())
	}
	nodes := coretest.Nodes(def)
	for i := range nodes {
		name := fmt.Sprintf("web-%d", i)
		bm.Publish(events.NodeAggregate(name), events.NodeEnrolled{Name: name, Capabilities: []string{}, Labels: map[string]string{}})
		for j, build := range builds {
			bm.Publish(events.NodeAggregate(name), events.ModuleAssigned{Node: name, Module: fmt.Sprintf("m%d", j), Build: build, Settings: map[string]string{}})
		}
	}
	h := Over(bm.Fold())
	pushAll(b, h, nodes)
	return bm, h, nodes
}

// pushAll pushes to the whole mesh and fails unless every one of its
// nodes was sent a declaration.
func pushAll(b testing.TB, h *Service, nodes int) {
	if r, err := h.push.Push(context.Background(), wire.PushRequest{CommandID: wire.NewCommandID()}); err != nil || len(r.Sent) != nodes {
		b.Fatalf("push: %v", err)
	}
}

// rawScan iterates the node rows and touches every value: the floor.
func rawScan(b *testing.B, proj *projections.Engine) int {
	n := 0
	err := proj.RawScan(func(it *pebble.Iterator) {
		for it.First(); it.Valid(); it.Next() {
			if len(it.Value()) > 0 {
				n++
			}
		}
	})
	if err != nil {
		b.Fatal(err)
	}
	return n
}

func rssMiB() float64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
			return float64(kb) / 1024
		}
	}
	return 0
}
