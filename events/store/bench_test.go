package store_test

import (
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
	payload, _ := events.Encode(events.NodeAggregate("web-1"), "c", 0, time.Now(), enrolled("web-1"))
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
