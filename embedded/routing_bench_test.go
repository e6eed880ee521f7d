package embedded_test

import (
	"context"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/meshctl/mesh/bench"
	"github.com/meshctl/mesh/embedded/embeddedtest"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// BenchmarkRoutingManySubjects measures the mesh's bus (embedded.Start,
// no subject cache) beside nats-server with its defaults (a cache of
// 1,024 subject matches), each storing a round of 10,000 declarations,
// one a node as a push makes them: published asynchronously and
// acknowledged, republished once stored to a subscriber of every node's
// subject. Each message is routed three times on a subject new to the
// cache (its own, its acknowledgement's reply, its republish). CPU by
// getrusage, the client's included. All three buses run in this process,
// so a round's CPU can hold another's leftovers: each round starts after
// a collection, the buses take turns in a rotating order, and a control
// (a second bus configured as the mesh's) says how far two identical
// buses read apart in the same run. The figures are the medians of the
// rounds' ratios: mesh/default, and control/mesh, which is noise alone.
//
//	go test ./embedded -run '^$' -bench RoutingManySubjects -benchtime 12x
func BenchmarkRoutingManySubjects(b *testing.B) {
	ctx := context.Background()
	mesh := embeddedtest.Server(b)
	def, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: b.TempDir(), NoSigs: true, NoLog: true})
	if err != nil {
		b.Fatal(err)
	}
	def.Start()
	b.Cleanup(def.Shutdown)
	if !def.ReadyForConnections(30 * time.Second) {
		b.Fatal("nats-server with its defaults did not listen within 30s")
	}
	const nodes = 10000
	payload := make([]byte, 1200)
	control := embeddedtest.Server(b)
	buses := []*router{newRouter(ctx, b, mesh.ClientURL(), nodes), newRouter(ctx, b, def.ClientURL(), nodes), newRouter(ctx, b, control.ClientURL(), nodes)}
	var vsDefault, vsControl []float64
	b.ResetTimer()
	for n := range b.N {
		// Each bus first in its turn: whichever goes later finds the
		// machine warmer.
		var spent [3]time.Duration
		for k := range buses {
			i := (k + n) % len(buses)
			runtime.GC()
			t0 := processCPU(b)
			buses[i].round(ctx, b, payload)
			spent[i] = processCPU(b) - t0
		}
		vsDefault = append(vsDefault, float64(spent[0])/float64(spent[1]))
		vsControl = append(vsControl, float64(spent[2])/float64(spent[0]))
	}
	b.StopTimer()
	b.ReportMetric(bench.Median(vsDefault), "mesh/default")
	b.ReportMetric(bench.Median(vsControl), "control/mesh")
}

// router is one bus's stream, its publisher and the subscriber that hears
// every republished declaration.
type router struct {
	js       jetstream.JetStream
	subjects []string
	heard    chan struct{}
}

func newRouter(ctx context.Context, b *testing.B, url string, nodes int) *router {
	nc, err := nats.Connect(url)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(nc.Close)
	// A lost acknowledgement fails its round rather than holding the
	// benchmark until go test's own timeout.
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(2*nodes), jetstream.WithPublishAsyncTimeout(time.Minute))
	if err != nil {
		b.Fatal(err)
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "R", Subjects: []string{"r.ev.*"}, Storage: jetstream.FileStorage,
		RePublish: &jetstream.RePublish{Source: "r.ev.*", Destination: "r.told.{{wildcard(1)}}"}}); err != nil {
		b.Fatal(err)
	}
	r := &router{js: js, heard: make(chan struct{}, 1)}
	for i := range nodes {
		r.subjects = append(r.subjects, "r.ev.n"+strconv.Itoa(i))
	}
	sub, err := nats.Connect(url)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(sub.Close)
	count := 0
	if _, err := sub.Subscribe("r.told.*", func(*nats.Msg) {
		if count++; count%nodes == 0 {
			r.heard <- struct{}{}
		}
	}); err != nil {
		b.Fatal(err)
	}
	if err := sub.Flush(); err != nil {
		b.Fatal(err)
	}
	return r
}

// round publishes a declaration to every node, waits for each
// acknowledgement, then for the subscriber to have heard them all.
func (r *router) round(ctx context.Context, b *testing.B, payload []byte) {
	futures := make([]jetstream.PubAckFuture, len(r.subjects))
	for i, s := range r.subjects {
		f, err := r.js.PublishAsync(s, payload)
		if err != nil {
			b.Fatal(err)
		}
		futures[i] = f
	}
	if err := bench.Acked(ctx, futures); err != nil {
		b.Fatal(err)
	}
	select {
	case <-r.heard:
	case <-time.After(time.Minute):
		b.Fatal("the subscriber did not hear every republished declaration within a minute")
	}
}

// processCPU is this process's CPU so far, bus and client together, as
// the operating system counts it (bench.Self).
func processCPU(b *testing.B) time.Duration {
	u, err := bench.Self()
	if err != nil {
		b.Fatal(err)
	}
	return u.CPU
}
