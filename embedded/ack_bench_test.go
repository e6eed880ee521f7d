package embedded_test

import (
	"context"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/meshctl/mesh/bench"
	"github.com/meshctl/mesh/embedded/embeddedtest"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// BenchmarkAnAcknowledgementsShare prices what a publish's acknowledgement
// costs on the mesh's bus: rounds of 10,000 messages of 1,200 bytes, each
// with a Msg-Id, stored once acknowledged (published asynchronously with a
// reply subject, as AppendMany publishes a push's declarations) and once
// not (no reply subject: stored, nothing answered; the last message of the
// round is published acknowledged, and its answer says the stream holds
// the rest, which one connection's messages reach in order). CPU by
// getrusage, bus and client together, the two kinds taking turns first.
// It says what a push could save by answering fewer: JetStream's fast
// batches answer a batch's messages every so many, but not with each
// one's stream sequence, which the fold needs to fold the controller's
// own sends from memory (docs/performance.md, issue 34).
//
//	go test ./embedded -run '^$' -bench AnAcknowledgementsShare -benchtime 8x
func BenchmarkAnAcknowledgementsShare(b *testing.B) {
	ctx := context.Background()
	srv := embeddedtest.Server(b)
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(nc.Close)
	const n = 10000
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(2*n), jetstream.WithPublishAsyncTimeout(time.Minute))
	if err != nil {
		b.Fatal(err)
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "A", Subjects: []string{"a.>"}, Storage: jetstream.FileStorage}); err != nil {
		b.Fatal(err)
	}
	payload := make([]byte, 1200)
	round := func(r int, acked bool) time.Duration {
		runtime.GC()
		t0 := processCPU(b)
		var futures []jetstream.PubAckFuture
		for i := range n {
			m := nats.NewMsg("a.r" + strconv.Itoa(r) + ".n" + strconv.Itoa(i))
			m.Data = payload
			m.Header.Set(jetstream.MsgIDHeader, strconv.FormatBool(acked)+"."+strconv.Itoa(r)+"."+strconv.Itoa(i))
			if acked || i == n-1 {
				f, err := js.PublishMsgAsync(m)
				if err != nil {
					b.Fatal(err)
				}
				futures = append(futures, f)
			} else if err := nc.PublishMsg(m); err != nil {
				b.Fatal(err)
			}
		}
		if err := bench.Acked(ctx, futures); err != nil {
			b.Fatal(err)
		}
		return processCPU(b) - t0
	}
	var ratios, with, without []float64
	b.ResetTimer()
	for r := range b.N {
		var a, u time.Duration
		if r%2 == 0 {
			a, u = round(2*r, true), round(2*r+1, false)
		} else {
			u, a = round(2*r+1, false), round(2*r, true)
		}
		ratios = append(ratios, float64(a)/float64(u))
		with, without = append(with, float64(a.Microseconds())/n), append(without, float64(u.Microseconds())/n)
	}
	b.StopTimer()
	b.ReportMetric(bench.Median(ratios), "acked/unacked")
	b.ReportMetric(bench.Median(with), "µs/acked")
	b.ReportMetric(bench.Median(without), "µs/unacked")
}
