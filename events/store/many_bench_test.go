package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/meshctl/mesh/bench"
	"github.com/meshctl/mesh/embedded/embeddedtest"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/events/store"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// BenchmarkAppendManyVsRawAsync measures AppendMany (a push's sends: each
// encoded, MACed, published expecting its node's version, its
// acknowledgement heard) beside raw JetStream's asynchronous
// publish of the same bytes with the same headers, a window of 2,000 of
// each in turn, in one process with its bus over loopback. CPU by
// getrusage, the bus's included on both sides. The figure that matters is
// many/raw: what AppendMany costs a send beyond the publish itself.
//
//	go test ./events/store -run '^$' -bench AppendManyVsRawAsync -benchtime 20x
func BenchmarkAppendManyVsRawAsync(b *testing.B) {
	ctx := events.WithBy(context.Background(), "bench")
	nc := embeddedtest.Conn(b, embeddedtest.Server(b))
	s, _, err := store.Open(ctx, nc, store.StreamConfig{})
	if err != nil {
		b.Fatal(err)
	}
	s.MAC = []byte("the log's MAC key, 32 bytes long")
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(4000))
	if err != nil {
		b.Fatal(err)
	}
	const window = 2000
	declaration, signature := make([]byte, 1200), make([]byte, 64)
	var raw, many time.Duration
	cpu := func() time.Duration {
		u, err := bench.Self()
		if err != nil {
			b.Fatal(err)
		}
		return u.CPU
	}
	b.ResetTimer()
	for r := range b.N {
		items := sends(window, fmt.Sprintf("r%dn", r))
		msgs := make([]*nats.Msg, window)
		for i := range items {
			sent := items[i].Event.(events.DeclarationSent)
			node := sent.Node
			sent.Declaration, sent.Signature = declaration, signature
			items[i].Event = sent
			data, err := events.Encode(items[i].Aggregate, items[i].CommandID, "bench", 0, time.Now(), sent)
			if err != nil {
				b.Fatal(err)
			}
			m := nats.NewMsg("mesh.rp." + node + ".DeclarationSent")
			m.Data = data
			m.Header.Set(jetstream.MsgIDHeader, items[i].CommandID)
			m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, "0")
			m.Header.Set(jetstream.ExpectedLastSubjSeqSubjHeader, "mesh.rp."+node+".>")
			m.Header.Set(events.MACHeader, "a MAC of the subject and the data, as long as one")
			msgs[i] = m
		}
		t0 := cpu()
		futures := make([]jetstream.PubAckFuture, window)
		for i, m := range msgs {
			if futures[i], err = js.PublishMsgAsync(m); err != nil {
				b.Fatal(err)
			}
		}
		if err := bench.Acked(ctx, futures); err != nil {
			b.Fatal(err)
		}
		t1 := cpu()
		out, err := s.AppendMany(ctx, items)
		if err != nil {
			b.Fatal(err)
		}
		for _, o := range out {
			if o.Err != nil {
				b.Fatal(o.Err)
			}
		}
		raw += t1 - t0
		many += cpu() - t1
	}
	b.StopTimer()
	n := float64(b.N * window)
	b.ReportMetric(float64(raw.Microseconds())/n, "raw-µs/send")
	b.ReportMetric(float64(many.Microseconds())/n, "many-µs/send")
	b.ReportMetric(float64(many)/float64(raw), "many/raw")
}
