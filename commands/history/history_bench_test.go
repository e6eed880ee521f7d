package history

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/meshctl/mesh/commands/core/coretest"
	"github.com/meshctl/mesh/declaration"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/fanout"
	"github.com/meshctl/mesh/wire"
)

// BenchmarkHistory answers the history of a node with 1,000 declarations in
// a stream of MESH_BENCH_EVENTS events (default 1,000,000). Target: 200 ms or
// less. Each declaration changes the content, so that history --diff reads
// every one back from the log: it is measured too (no target), and beside
// both, the bare direct gets of those 1,000 events, which history --diff
// cannot beat (ratios against them in the same run).
func BenchmarkHistory(b *testing.B) {
	ctx := context.Background()
	total := coretest.Events(1_000_000)
	bm := coretest.New(b, false)
	publish := bm.Publish
	signer, _ := declaration.NewSigner(bm.Key)
	publish(events.NodeAggregate("app-1"), events.NodeEnrolled{Name: "app-1"})
	const decls = 1000
	every := total / decls
	previous := ""
	var seqs []uint64
	for i := 1; i <= total; i++ {
		if i%every == 0 && i/every <= decls {
			seq := uint64(i / every)
			content := fmt.Sprintf("x = %d\n", i)
			seqs = append(seqs, uint64(i)+1) // app-1's enrolment is event 1
			previous = bm.Send(signer, "app-1", seq, previous, content)
			continue
		}
		name := fmt.Sprintf("n%d", i)
		publish(events.NodeAggregate(name), events.NodeEnrolled{Name: name})
	}
	h := New(bm.Fold())
	measure := func(fn func() error) float64 {
		start := time.Now()
		for range b.N {
			if err := fn(); err != nil {
				b.Fatal(err)
			}
		}
		return float64(time.Since(start).Microseconds()) / 1000 / float64(b.N)
	}
	history := func(diff bool) func() error {
		return func() error {
			hist, err := h.History(ctx, wire.HistoryRequest{Node: "app-1", Diff: diff})
			if err == nil && (len(hist.Entries) != decls || diff && len(hist.Entries[decls-1].Changes) == 0) {
				err = fmt.Errorf("history: %d entries", len(hist.Entries))
			}
			return err
		}
	}
	b.ResetTimer()
	plain := measure(history(false))
	diff := measure(history(true))
	raw := measure(func() error {
		errs := make([]error, len(seqs))
		fanout.Each(len(seqs), 32, func(i int) {
			m, err := h.Store.Get(ctx, seqs[i])
			if err == nil && m.Seq != seqs[i] {
				err = fmt.Errorf("get %d answered %d", seqs[i], m.Seq)
			}
			errs[i] = err
		})
		return errors.Join(errs...)
	})
	b.ReportMetric(plain, "ms/history")
	b.ReportMetric(diff, "ms/history-diff")
	b.ReportMetric(raw, "ms/raw-gets")
	b.ReportMetric(plain/raw, "history/raw")
	b.ReportMetric(diff/raw, "diff/raw")
}
