package projections

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/meshctl/mesh/embedded/embeddedtest"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/events/store"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// trickleGap is how far apart the live fold's events arrive when thousands
// of real agents report a push, each over its own connection (about 0.3 ms
// in mesh serve's profiles, issue 34).
const trickleGap = 300 * time.Microsecond

// trickleEvents is how many events each phase of an iteration trickles in.
const trickleEvents = 2_000

// BenchmarkTrickleFold measures the process's CPU (the bus is in it) per
// event while events are published one at a time, trickleGap apart (the
// ticker permitting), in
// two phases of the same iteration: followed by a raw ordered consumer
// doing nothing (the floor, the engine stopped), then by the live fold.
// fold-µs/event is the difference, the fold's own CPU per trickled event;
// fold/raw the ratio of the two phases' CPU; commits/event how many
// commits the live fold made per event; gap-µs how far apart the fold
// phase's events came in fact.
func BenchmarkTrickleFold(b *testing.B) {
	ctx := context.Background()
	nc := embeddedtest.Conn(b, embeddedtest.Server(b))
	s, _, err := store.Open(ctx, nc, store.StreamConfig{})
	if err != nil {
		b.Fatal(err)
	}
	keyed(s)
	js, _ := jetstream.New(nc)
	e, _, err := Open(ctx, Options{Dir: filepath.Join(b.TempDir(), "proj"), Store: s, Keys: testKeys})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	var raw, fold, wall time.Duration
	var commits uint64
	b.ResetTimer()
	for i := range b.N {
		e.Stop()
		msgs := trickleMsgs(b, fmt.Sprintf("raw-%d", i))
		last := lastSeq(b, s)
		seen := make(chan struct{})
		var got atomic.Uint64
		cons, err := js.OrderedConsumer(ctx, events.Stream, jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverNewPolicy})
		if err != nil {
			b.Fatal(err)
		}
		cc, err := cons.Consume(func(m jetstream.Msg) {
			if md, _ := m.Metadata(); md != nil && got.Add(1) == trickleEvents {
				close(seen)
			}
		})
		if err != nil {
			b.Fatal(err)
		}
		cpu0 := processCPU(b)
		trickle(b, js, msgs)
		<-seen
		raw += processCPU(b) - cpu0
		cc.Stop()

		e.Start()
		waitForB(b, e, last+trickleEvents)
		msgs = trickleMsgs(b, fmt.Sprintf("fold-%d", i))
		c0 := e.commits.Load()
		cpu0, t0 := processCPU(b), time.Now()
		trickle(b, js, msgs)
		waitForB(b, e, last+2*trickleEvents)
		fold += processCPU(b) - cpu0
		wall += time.Since(t0)
		commits += e.commits.Load() - c0
	}
	b.StopTimer()
	n := float64(b.N * trickleEvents)
	b.ReportMetric(float64(raw.Microseconds())/n, "raw-µs/event")
	b.ReportMetric(float64((fold-raw).Microseconds())/n, "fold-µs/event")
	b.ReportMetric(fold.Seconds()/raw.Seconds(), "fold/raw")
	b.ReportMetric(float64(commits)/n, "commits/event")
	b.ReportMetric(float64(wall.Microseconds())/n, "gap-µs")
}

// trickleMsgs are trickleEvents enrolments of nodes named after prefix: a
// node row and the checkpoint to write at each commit, as a report's.
func trickleMsgs(b *testing.B, prefix string) []*nats.Msg {
	msgs := make([]*nats.Msg, trickleEvents)
	for i := range msgs {
		name := fmt.Sprintf("%s-%d", prefix, i)
		msgs[i] = msgAs(b, testKeys.LogMAC(), nil, events.NodeAggregate(name), events.NodeEnrolled{Name: name, Capabilities: []string{"linux"}})
	}
	return msgs
}

// trickle publishes msgs one at a time, trickleGap apart, as many agents
// do: not waiting for each acknowledgement, which on a loaded machine took
// longer than the gap and spread the events out three times as far.
func trickle(b *testing.B, js jetstream.JetStream, msgs []*nats.Msg) {
	tick := time.NewTicker(trickleGap)
	defer tick.Stop()
	for _, m := range msgs {
		<-tick.C
		if _, err := js.PublishMsgAsync(m); err != nil {
			b.Fatal(err)
		}
	}
	<-js.PublishAsyncComplete()
}

func lastSeq(b *testing.B, s *store.Store) uint64 {
	st, err := s.State(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	return st.LastSeq
}

func waitForB(b *testing.B, e *Engine, seq uint64) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := e.WaitFor(ctx, seq); err != nil {
		b.Fatal(err)
	}
}

// processCPU is the CPU this process has used (user and system, every thread).
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
