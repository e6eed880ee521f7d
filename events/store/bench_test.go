package store_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/meshctl/mesh/embedded/embeddedtest"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/events/store"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// BenchmarkAppendVsRawPublish measures a checked, idempotent Append beside a
// raw synchronous JetStream publish of the same bytes, in the same run and
// interleaved in rounds, so machine noise hits both alike. Both go to the
// mesh's own stream: the difference is only what Append adds (the envelope,
// the Msg-Id, the expectation on the aggregate's filter). The figure that
// matters is append/raw: the share of the raw publish rate an append keeps
// (target 0.8 or better).
func BenchmarkAppendVsRawPublish(b *testing.B) {
	// in-process is how mesh up's controller reaches its bus; tcp is mesh serve's.
	b.Run("in-process", func(b *testing.B) {
		nc, err := embeddedtest.Server(b).Connect()
		if err != nil {
			b.Fatal(err)
		}
		defer nc.Close()
		benchAppend(b, nc)
	})
	b.Run("tcp", func(b *testing.B) {
		benchAppend(b, embeddedtest.Conn(b, embeddedtest.Server(b)))
	})
}

func benchAppend(b *testing.B, nc *nats.Conn) {
	ctx := context.Background()
	s, _, err := store.Open(ctx, nc, store.StreamConfig{})
	if err != nil {
		b.Fatal(err)
	}
	js, _ := jetstream.New(nc)
	const nodes = 100
	versions := make([]uint64, nodes)
	payload, _ := events.Encode(events.NodeAggregate("web-1"), "c", "", 0, time.Now(), enrolled("web-1"))
	var raw, mesh time.Duration
	const round = 200
	b.ResetTimer()
	for done := 0; done < b.N; done += round {
		n := min(round, b.N-done)
		t0 := time.Now()
		for i := range n {
			if _, err := js.Publish(ctx, fmt.Sprintf("mesh.rp.n%d.raw", (done+i)%nodes), payload); err != nil {
				b.Fatal(err)
			}
		}
		t1 := time.Now()
		for i := range n {
			k := (done + i) % nodes
			agg := events.NodeAggregate(fmt.Sprintf("n%d", k))
			seq, err := s.Append(ctx, agg, versions[k], fmt.Sprintf("cmd-%d", done+i), enrolled(agg.ID))
			if err != nil {
				b.Fatal(err)
			}
			versions[k] = seq
		}
		raw += t1.Sub(t0)
		mesh += time.Since(t1)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/raw.Seconds(), "raw-publish/s")
	b.ReportMetric(float64(b.N)/mesh.Seconds(), "append/s")
	b.ReportMetric(raw.Seconds()/mesh.Seconds(), "append/raw")
}

// BenchmarkImport restores a backup of 100,000 events into a fresh stream
// (every message checked to land at its sequence, a window in flight)
// beside a raw asynchronous publish of the same messages to another fresh
// stream, in the same run. Target: seconds, not minutes, for 100,000.
func BenchmarkImport(b *testing.B) {
	ctx := context.Background()
	const n = 100_000
	src, _, err := store.Open(ctx, embeddedtest.Conn(b, embeddedtest.Server(b)), store.StreamConfig{})
	if err != nil {
		b.Fatal(err)
	}
	js := src.JetStream()
	for i := range n {
		name := fmt.Sprintf("node-%d", i)
		data, _ := events.Encode(events.NodeAggregate(name), "c", "", 0, time.Now(), events.NodeEnrolled{Name: name})
		if _, err := js.PublishAsync(events.NodeAggregate(name).Subject("NodeEnrolled"), data); err != nil {
			b.Fatal(err)
		}
	}
	<-js.PublishAsyncComplete()
	var backup bytes.Buffer
	m, err := src.Export(ctx, &backup)
	if err != nil {
		b.Fatal(err)
	}
	var imp, raw time.Duration
	b.ResetTimer()
	for range b.N {
		dst, _, err := store.Open(ctx, embeddedtest.Conn(b, embeddedtest.Server(b)), store.StreamConfig{})
		if err != nil {
			b.Fatal(err)
		}
		t0 := time.Now()
		if _, _, err := dst.Import(ctx, m, bytes.NewReader(backup.Bytes())); err != nil {
			b.Fatal(err)
		}
		imp += time.Since(t0)
		other, _, err := store.Open(ctx, embeddedtest.Conn(b, embeddedtest.Server(b)), store.StreamConfig{})
		if err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		ojs := other.JetStream()
		for i := range n {
			name := fmt.Sprintf("node-%d", i)
			data, _ := events.Encode(events.NodeAggregate(name), "c", "", 0, time.Now(), events.NodeEnrolled{Name: name})
			if _, err := ojs.PublishAsync(events.NodeAggregate(name).Subject("NodeEnrolled"), data); err != nil {
				b.Fatal(err)
			}
		}
		<-ojs.PublishAsyncComplete()
		raw += time.Since(t1)
	}
	b.ReportMetric(imp.Seconds()/float64(b.N), "s/import")
	b.ReportMetric(float64(n*b.N)/imp.Seconds(), "import/s")
	b.ReportMetric(raw.Seconds()/imp.Seconds(), "import/raw")
}
