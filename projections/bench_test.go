package projections

import (
	"context"
	"fmt"
	"path/filepath"
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
	js, _ := jetstream.New(nc)
	for i := range benchEvents {
		name := fmt.Sprintf("node-%d", i)
		data, _ := events.Encode(events.NodeAggregate(name), "c", 0, time.Now(),
			events.NodeEnrolled{Name: name, Capabilities: []string{"linux"}, Labels: map[string]string{"zone": "a"}})
		if _, err := js.PublishAsync(events.NodeAggregate(name).Subject("NodeEnrolled"), data); err != nil {
			b.Fatal(err)
		}
	}
	<-js.PublishAsyncComplete()
	dir := b.TempDir()
	var raw, fold time.Duration
	b.ResetTimer()
	for i := range b.N {
		t0 := time.Now()
		rawRead(b, js)
		t1 := time.Now()
		e, _, err := Open(ctx, Options{Dir: filepath.Join(dir, fmt.Sprint(i)), Store: s})
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
