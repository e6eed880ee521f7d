package commands_test

// What a connect to a closed bus costs: the controller decides each one
// (the callout), so its price is a node's price at every reconnect.

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/meshctl/mesh/agent"
	"github.com/meshctl/mesh/embedded"
	"github.com/nats-io/nats.go"
)

// BenchmarkConnectAsNode: a node's connect on a closed bus, which the
// controller decides (key derivation, the node's row, two signed JWTs),
// beside a connect to an open embedded bus in the same run.
func BenchmarkConnectAsNode(b *testing.B) {
	m := newClosedMesh(b, 0)
	j := m.enrollAndDeclare("app-1")
	opts, err := j.Options()
	if err != nil {
		b.Fatal(err)
	}
	open, err := embedded.Start(context.Background(), embedded.Options{Dir: b.TempDir(), Port: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer open.Close()
	measure := func(url string, opts ...nats.Option) float64 {
		start := time.Now()
		for range b.N {
			nc, err := nats.Connect(url, opts...)
			if err != nil {
				b.Fatal(err)
			}
			nc.Close()
		}
		return float64(time.Since(start).Microseconds()) / float64(b.N)
	}
	b.ResetTimer()
	closed := measure(m.srv.ClientURL(), opts...)
	bare := measure(open.ClientURL())
	b.ReportMetric(closed, "µs/closed-connect")
	b.ReportMetric(bare, "µs/open-connect")
	b.ReportMetric(closed/bare, "closed/open")
}

// BenchmarkConnectManyNodes: 64 nodes connecting at once to a closed bus
// (a restart of the bus), beside the same to an open bus.
func BenchmarkConnectManyNodes(b *testing.B) {
	m := newClosedMesh(b, 0)
	var joins []agent.Join
	for i := range 64 {
		j := m.enrollAndDeclare(fmt.Sprintf("n%d", i))
		joins = append(joins, j)
	}
	open, err := embedded.Start(context.Background(), embedded.Options{Dir: b.TempDir(), Port: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer open.Close()
	round := func(url string, withIdentity bool) float64 {
		start := time.Now()
		for range b.N {
			var wg sync.WaitGroup
			for _, j := range joins {
				wg.Go(func() {
					var opts []nats.Option
					if withIdentity {
						opts, _ = j.Options()
					}
					nc, err := nats.Connect(url, opts...)
					if err != nil {
						b.Error(err)
						return
					}
					nc.Close()
				})
			}
			wg.Wait()
		}
		return float64(time.Since(start).Milliseconds()) / float64(b.N)
	}
	b.ResetTimer()
	closed := round(m.srv.ClientURL(), true)
	bare := round(open.ClientURL(), false)
	b.ReportMetric(closed, "ms/64-closed")
	b.ReportMetric(bare, "ms/64-open")
	b.ReportMetric(closed/bare, "closed/open")
}
