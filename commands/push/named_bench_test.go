package push_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/meshctl/mesh/commands/core/coretest"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/manifest"
	"github.com/meshctl/mesh/wire"
	"github.com/nats-io/nats.go/jetstream"
)

// BenchmarkPushOneNode pushes one named node of a 10,000-node mesh, right
// after an assignment moved the composition version (so nothing composed
// is cached), beside one raw JetStream publish of the same bytes with its
// ack in the same run. Issue 34: a push that names few nodes reads and
// composes those alone; it read every node's row and composed every node.
func BenchmarkPushOneNode(b *testing.B) {
	ctx := context.Background()
	bm := newBenchMesh(b, true)
	m, _ := manifest.Parse([]byte(`{"module":"app","settings":{"port":{"default":"8080"}},"resources":[
	  {"kind":"file","path":"/etc/app/app.conf","mode":"0644","template":"node = {{.Node.Name}}\nport = {{.Settings.port}}\n"}]}`))
	bm.Publish(events.ModuleAggregate("app"), events.ModuleRegistered{Module: "app", Build: m.Build(), Manifest: m.Canonical()})
	nodes := coretest.Nodes(10_000)
	for i := range nodes {
		name := fmt.Sprintf("web-%d", i)
		bm.Publish(events.NodeAggregate(name), events.NodeEnrolled{Name: name, Capabilities: []string{}, Labels: map[string]string{}})
		bm.Publish(events.NodeAggregate(name), events.ModuleAssigned{Node: name, Module: "app", Build: m.Build(), Settings: map[string]string{}})
	}
	<-bm.JS.PublishAsyncComplete()
	if _, err := bm.JS.CreateStream(ctx, jetstream.StreamConfig{Name: "RAW", Subjects: []string{"raw.>"}, Storage: jetstream.FileStorage}); err != nil {
		b.Fatal(err)
	}
	h := bm.fold()
	var push, raw time.Duration
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		// Another node's setting moves the composition version: the push
		// after it finds no composition cached, as after any assignment.
		_, err := h.Nodes.Assign(ctx, wire.AssignRequest{CommandID: wire.NewCommandID(), Node: "web-1", Module: "app", Settings: map[string]string{"port": fmt.Sprint(9000 + i)}})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		t0 := time.Now()
		r, err := h.Push.Push(ctx, wire.PushRequest{CommandID: wire.NewCommandID(), Node: "web-0"})
		if err != nil || len(r.Sent) != 1 {
			b.Fatalf("push: %v, %+v", err, r)
		}
		push += time.Since(t0)
		last, err := bm.Store.Get(ctx, r.Sent[0].StreamSeq)
		if err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if _, err := bm.JS.Publish(ctx, fmt.Sprintf("raw.%d", i), last.Data); err != nil {
			b.Fatal(err)
		}
		raw += time.Since(t1)
	}
	b.StopTimer()
	b.ReportMetric(push.Seconds()/float64(b.N)*1e3, "ms/push")
	b.ReportMetric(push.Seconds()/raw.Seconds(), "push/raw-publish")
}
