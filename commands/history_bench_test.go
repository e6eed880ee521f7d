package commands

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/meshctl/mesh/compose"
	"github.com/meshctl/mesh/declaration"
	"github.com/meshctl/mesh/events"
	"github.com/nats-io/nkeys"
)

// BenchmarkHistory answers the history of a node with 1,000 declarations in
// a stream of MESH_BENCH_EVENTS events (default 1,000,000). Target: 200 ms or less.
func BenchmarkHistory(b *testing.B) {
	ctx := context.Background()
	total := 1_000_000
	if v, err := strconv.Atoi(os.Getenv("MESH_BENCH_EVENTS")); err == nil && v > 0 {
		total = v
	}
	bm := newBenchMesh(b, false)
	publish := bm.publish
	kp, _ := nkeys.CreateAccount()
	signer, _ := declaration.NewSigner(kp)
	publish(events.NodeAggregate("app-1"), events.NodeEnrolled{Name: "app-1"})
	const decls = 1000
	every := total / decls
	content := "x = 1\n"
	previous := ""
	for i := 1; i <= total; i++ {
		if i%every == 0 && i/every <= decls {
			seq := uint64(i / every)
			d := declaration.New(compose.Declaration{Mesh: "mesh", Node: "app-1", Modules: []compose.ModuleBuild{},
				Resources: []compose.Resource{{Path: "/etc/app.conf", Kind: "file", Mode: "0644", Content: &content, Module: "app"}},
				Receives:  []compose.Receipt{}}, seq, previous, time.Now())
			s := signer.Seal(d)
			previous = s.Digest()
			publish(events.NodeAggregate("app-1"), events.DeclarationSent{Node: "app-1", Sequence: seq, Digest: s.Digest(),
				ContentDigest: d.ContentDigest(), By: "push", Resources: 1, Declaration: s.Bytes, Signature: s.Signature, Key: s.Key})
			continue
		}
		name := fmt.Sprintf("n%d", i)
		publish(events.NodeAggregate(name), events.NodeEnrolled{Name: name})
	}
	h := bm.fold()
	b.ResetTimer()
	for range b.N {
		hist, err := h.History(ctx, HistoryRequest{Node: "app-1"})
		if err != nil || len(hist.Entries) != decls {
			b.Fatalf("history: %v, %d entries", err, len(hist.Entries))
		}
	}
	b.ReportMetric(b.Elapsed().Seconds()*1000/float64(b.N), "ms/history")
}
