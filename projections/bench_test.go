package projections

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/meshctl/mesh/embedded/embeddedtest"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/events/store"
	"github.com/nats-io/nats.go/jetstream"
)

// benchEvents is the stream length each iteration folds.
const benchEvents = 100_000

// BenchmarkFoldVsRawRead folds a stream of node events into Pebble on disk,
// beside a raw ordered-consumer read of the same stream in the same run. The
// figure that matters is fold/raw, the share of the raw read rate a fold keeps
// (target 0.5 or better).
func BenchmarkFoldVsRawRead(b *testing.B) {
	ctx := context.Background()
	srv := embeddedtest.Server(b)
	nc := embeddedtest.Conn(b, srv)
	s, _, err := store.Open(ctx, nc, store.StreamConfig{})
	if err != nil {
		b.Fatal(err)
	}
	keyed(s)
	js, _ := jetstream.New(nc)
	publishEnrolments(b, js, benchEvents)
	dir := b.TempDir()
	var raw, fold time.Duration
	b.ResetTimer()
	for i := range b.N {
		t0 := time.Now()
		rawRead(b, js)
		t1 := time.Now()
		e, _, err := Open(ctx, Options{Dir: filepath.Join(dir, fmt.Sprint(i)), Store: s, Keys: testKeys})
		if err != nil {
			b.Fatal(err)
		}
		e.Start()
		if err := e.WaitFor(ctx, benchEvents); err != nil {
			b.Fatal(err)
		}
		fold += time.Since(t1)
		raw += t1.Sub(t0)
		e.Close()
	}
	b.StopTimer()
	total := float64(b.N * benchEvents)
	b.ReportMetric(total/raw.Seconds(), "raw-read/s")
	b.ReportMetric(total/fold.Seconds(), "fold/s")
	b.ReportMetric(raw.Seconds()/fold.Seconds(), "fold/raw")
}

// rawRead is the floor: an ordered consumer with the same pull size, doing nothing.
func rawRead(b *testing.B, js jetstream.JetStream) {
	cons, err := js.OrderedConsumer(context.Background(), events.Stream, jetstream.OrderedConsumerConfig{})
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan struct{})
	cc, err := cons.Consume(func(m jetstream.Msg) {
		if md, _ := m.Metadata(); md.NumPending == 0 {
			close(done)
		}
	}, jetstream.PullMaxMessages(5000))
	if err != nil {
		b.Fatal(err)
	}
	<-done
	cc.Stop()
}

// BenchmarkRebuild rebuilds the read models of a stream of MESH_BENCH_EVENTS
// node events (default 1,000,000) while the live ones keep serving, beside a
// raw ordered-consumer read of the same stream in the same run. Target: the
// rebuild at half the raw read rate or better.
func BenchmarkRebuild(b *testing.B) {
	ctx := context.Background()
	n := benchSize(1_000_000)
	srv := embeddedtest.Server(b)
	nc := embeddedtest.Conn(b, srv)
	s, _, err := store.Open(ctx, nc, store.StreamConfig{})
	if err != nil {
		b.Fatal(err)
	}
	keyed(s)
	js, _ := jetstream.New(nc)
	publishEnrolments(b, js, n)
	e, _, err := Open(ctx, Options{Dir: b.TempDir(), Store: s, Keys: testKeys})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	e.Start()
	if err := e.WaitFor(ctx, uint64(n)); err != nil {
		b.Fatal(err)
	}
	var raw, rebuild time.Duration
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		rawRead(b, js)
		t1 := time.Now()
		if _, err := e.Rebuild(ctx, nil); err != nil {
			b.Fatal(err)
		}
		rebuild += time.Since(t1)
		raw += t1.Sub(t0)
	}
	b.StopTimer()
	total := float64(b.N * n)
	b.ReportMetric(total/raw.Seconds(), "raw-read/s")
	b.ReportMetric(total/rebuild.Seconds(), "rebuild/s")
	b.ReportMetric(raw.Seconds()/rebuild.Seconds(), "rebuild/raw")
}

func benchSize(def int) int {
	if v, err := strconv.Atoi(os.Getenv("MESH_BENCH_EVENTS")); err == nil && v > 0 {
		return v
	}
	return def
}

func publishEnrolments(b *testing.B, js jetstream.JetStream, n int) {
	for i := range n {
		name := fmt.Sprintf("node-%d", i)
		data, _ := events.Encode(events.NodeAggregate(name), "c", 0, time.Now(),
			events.NodeEnrolled{Name: name, Capabilities: []string{"linux"}, Labels: map[string]string{"zone": "a"}})
		if _, err := js.PublishAsync(events.NodeAggregate(name).Subject("NodeEnrolled"), data); err != nil {
			b.Fatal(err)
		}
	}
	<-js.PublishAsyncComplete()
}
