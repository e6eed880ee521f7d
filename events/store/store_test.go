package store_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/meshctl/mesh/embedded/embeddedtest"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/events/store"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func open(t *testing.T, nc *nats.Conn) *store.Store {
	t.Helper()
	s, _, err := store.Open(context.Background(), nc, store.StreamConfig{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func enrolled(name string) events.NodeEnrolled {
	return events.NodeEnrolled{Name: name, Capabilities: []string{"linux"}}
}

func TestAppendLoadAndConflict(t *testing.T) {
	ctx := context.Background()
	s := open(t, embeddedtest.Conn(t, embeddedtest.Server(t)))
	agg := events.NodeAggregate("web-1")

	seq, err := s.Append(ctx, agg, 0, "cmd-1", enrolled("web-1"))
	if err != nil {
		t.Fatal(err)
	}
	recs, version, err := s.Load(ctx, agg)
	if err != nil {
		t.Fatal(err)
	}
	if version != seq || len(recs) != 1 || recs[0].Envelope.CommandID != "cmd-1" {
		t.Fatalf("load: version %d (want %d), %d events: %+v", version, seq, len(recs), recs)
	}
	if got := recs[0].Event.(events.NodeEnrolled).Name; got != "web-1" {
		t.Fatalf("decoded name %q", got)
	}
	// A second writer that still believes the node has no events loses.
	if _, err := s.Append(ctx, agg, 0, "cmd-2", enrolled("web-1")); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("stale expectation: err = %v, want ErrConflict", err)
	}
	// Another aggregate is untouched by web-1's version.
	if _, err := s.Append(ctx, events.NodeAggregate("web-2"), 0, "cmd-3", enrolled("web-2")); err != nil {
		t.Fatal(err)
	}
}

func TestRetryWithSameCommandIDStoresOnce(t *testing.T) {
	ctx := context.Background()
	s := open(t, embeddedtest.Conn(t, embeddedtest.Server(t)))
	agg := events.NodeAggregate("web-1")
	first, err := s.Append(ctx, agg, 0, "cmd-1", enrolled("web-1"))
	if err != nil {
		t.Fatal(err)
	}
	// The retry carries a now-stale expectation: R1 answers 10071 before it
	// looks at the Msg-Id, and the store must still recognise its own write.
	again, err := s.Append(ctx, agg, 0, "cmd-1", enrolled("web-1"))
	if err != nil {
		t.Fatalf("retry: %v", err)
	}
	if again != first {
		t.Fatalf("retry answered sequence %d, want the original %d", again, first)
	}
	st, _ := s.State(ctx)
	if st.Msgs != 1 {
		t.Fatalf("stream holds %d messages after a retry, want 1", st.Msgs)
	}
}

func TestBatchIsAtomic(t *testing.T) {
	ctx := context.Background()
	s := open(t, embeddedtest.Conn(t, embeddedtest.Server(t)))
	agg := events.NodeAggregate("web-1")
	last, err := s.Append(ctx, agg, 0, "cmd-1", enrolled("web-1"), events.NodeRetired{Name: "web-1"})
	if err != nil {
		t.Fatal(err)
	}
	recs, version, err := s.Load(ctx, agg)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 || version != last || recs[1].Seq != recs[0].Seq+1 {
		t.Fatalf("batch: %d events, version %d, last %d", len(recs), version, last)
	}
	// A batch whose expectation is stale stores none of its events.
	if _, err := s.Append(ctx, agg, recs[0].Seq, "cmd-2", enrolled("web-1"), events.NodeRetired{Name: "web-1"}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("stale batch: err = %v, want ErrConflict", err)
	}
	st, _ := s.State(ctx)
	if st.Msgs != 2 {
		t.Fatalf("stream holds %d messages after a refused batch, want 2", st.Msgs)
	}
	// A retried batch answers the original last sequence.
	again, err := s.Append(ctx, agg, 0, "cmd-1", enrolled("web-1"), events.NodeRetired{Name: "web-1"})
	if err != nil || again != last {
		t.Fatalf("retried batch: seq %d err %v, want %d", again, err, last)
	}
}

func TestConcurrentWritersOneWinner(t *testing.T) {
	ctx := context.Background()
	srv := embeddedtest.Server(t)
	// Two stores on two connections: two controllers sharing one stream.
	stores := []*store.Store{open(t, embeddedtest.Conn(t, srv)), open(t, embeddedtest.Conn(t, srv))}
	agg := events.NodeAggregate("db-1")
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins, conflicts := 0, 0
	for i := range 32 {
		wg.Go(func() {
			_, err := stores[i%2].Append(ctx, agg, 0, fmt.Sprintf("cmd-%d", i), enrolled("db-1"))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				wins++
			case errors.Is(err, store.ErrConflict):
				conflicts++
			default:
				t.Errorf("writer %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	if wins != 1 || conflicts != 31 {
		t.Fatalf("%d winners and %d conflicts, want 1 and 31", wins, conflicts)
	}
}

func TestStreamAssertionIsIdempotentAndRepairs(t *testing.T) {
	ctx := context.Background()
	nc := embeddedtest.Conn(t, embeddedtest.Server(t))
	_, a, err := store.Open(ctx, nc, store.StreamConfig{})
	if err != nil || a.Action != "created" {
		t.Fatalf("first open: %v %v", a, err)
	}
	_, a, err = store.Open(ctx, nc, store.StreamConfig{})
	if err != nil || a.Action != "unchanged" {
		t.Fatalf("second open: %v %v", a, err)
	}
	js, _ := jetstream.New(nc)
	st, _ := js.Stream(ctx, events.Stream)
	cfg := st.CachedInfo().Config
	cfg.AllowDirect = false
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	_, a, err = store.Open(ctx, nc, store.StreamConfig{})
	if err != nil || a.Action != "updated" || !strings.Contains(fmt.Sprint(a.Changes), "allow_direct") {
		t.Fatalf("open after drift: %v %v", a, err)
	}
}

// A newer controller's event stops a load (rule 19): deciding without it
// could contradict it.
func TestUnknownEventTypeIsAnError(t *testing.T) {
	ctx := context.Background()
	nc := embeddedtest.Conn(t, embeddedtest.Server(t))
	s := open(t, nc)
	agg := events.NodeAggregate("web-1")
	if _, err := s.Append(ctx, agg, 0, "cmd-1", enrolled("web-1")); err != nil {
		t.Fatal(err)
	}
	js, _ := jetstream.New(nc)
	if _, err := js.Publish(ctx, agg.Subject("NodeTeleported"),
		[]byte(`{"id":"x","type":"NodeTeleported","version":7,"aggregate":{"kind":"node","id":"web-1"},"data":{}}`)); err != nil {
		t.Fatal(err)
	}
	_, _, err := s.Load(ctx, agg)
	if !errors.Is(err, events.ErrNewer) || !strings.Contains(err.Error(), "NodeTeleported (version 7)") {
		t.Fatalf("load over an unknown event: %v", err)
	}
}

func TestReadDeliversInOrderAndStops(t *testing.T) {
	ctx := context.Background()
	s := open(t, embeddedtest.Conn(t, embeddedtest.Server(t)))
	for i := range 10 {
		name := fmt.Sprintf("n%d", i)
		if _, err := s.Append(ctx, events.NodeAggregate(name), 0, "c-"+name, enrolled(name)); err != nil {
			t.Fatal(err)
		}
	}
	var got []uint64
	err := s.Read(ctx, store.ReadOptions{From: 4}, func(m store.Msg) error {
		got = append(got, m.Seq)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != "[4 5 6 7 8 9 10]" {
		t.Fatalf("read from 4: %v", got)
	}
	// Reading past the end is "nothing", not a wait.
	if err := s.Read(ctx, store.ReadOptions{From: 11}, func(store.Msg) error { t.Fatal("delivered past the end"); return nil }); err != nil {
		t.Fatal(err)
	}
}

// A node's store reads the newest message on its subject by the direct get
// API alone, says when there is none, and refuses what only the
// controller's store can do rather than failing on a missing handle.
func TestNodeStoreReadsItsLastByDirectGet(t *testing.T) {
	ctx := context.Background()
	srv := embeddedtest.Server(t)
	st, _, err := store.Open(ctx, embeddedtest.Conn(t, srv), store.StreamConfig{})
	if err != nil {
		t.Fatal(err)
	}
	node, err := store.AttachNode(embeddedtest.Conn(t, srv), "")
	if err != nil {
		t.Fatal(err)
	}
	subject := events.NodeAggregate("web-1").Subject("NodeEnrolled")
	if _, found, err := node.Last(ctx, subject); found || err != nil {
		t.Fatalf("before any event: found %v, %v", found, err)
	}
	seq, err := st.Append(ctx, events.NodeAggregate("web-1"), 0, "c1", events.NodeEnrolled{Name: "web-1"})
	if err != nil {
		t.Fatal(err)
	}
	want, _, _ := st.Last(ctx, subject)
	got, found, err := node.Last(ctx, subject)
	if err != nil || !found || got.Seq != seq || got.Subject != subject || string(got.Data) != string(want.Data) || !got.Time.Equal(want.Time) {
		t.Fatalf("node's last: %+v %v %v; the controller's: %+v", got, found, err, want)
	}
	if _, err := node.State(ctx); err == nil || !strings.Contains(err.Error(), "controller's") {
		t.Fatalf("a node's store reading the stream's state: %v", err)
	}
}

// A foreign message on an aggregate's subjects (rule 19: garbage, or an
// acknowledgement a reply subject aimed there) is none of its events: Load
// passes over it, but answers it as the version, since the stream's
// expectation counts every message, so the next Append lands.
func TestLoadPassesOverAForeignMessage(t *testing.T) {
	ctx := context.Background()
	nc := embeddedtest.Conn(t, embeddedtest.Server(t))
	s := open(t, nc)
	agg := events.NodeAggregate("web-1")
	if _, err := s.Append(ctx, agg, 0, "cmd-1", enrolled("web-1")); err != nil {
		t.Fatal(err)
	}
	js, _ := jetstream.New(nc)
	ack, err := js.Publish(ctx, agg.Subject("NodeRetired"), []byte(`{"stream":"MESH","seq":1}`))
	if err != nil {
		t.Fatal(err)
	}
	recs, version, err := s.Load(ctx, agg)
	if err != nil || len(recs) != 1 || version != ack.Sequence {
		t.Fatalf("load over a foreign message: %d events, version %d (want %d), %v", len(recs), version, ack.Sequence, err)
	}
	if _, err := s.Append(ctx, agg, version, "cmd-2", events.NodeRetired{Name: "web-1"}); err != nil {
		t.Fatalf("append after it: %v", err)
	}
}

// Rule 25: loading an aggregate leaves nothing on the stream. A consumer a
// load created lingered after it, and a stream refuses more than a
// thousand: a mesh failed every command past about a thousand in five
// minutes. 1,100 loads here leave no consumer.
func TestLoadingLeavesNoConsumer(t *testing.T) {
	ctx := context.Background()
	nc := embeddedtest.Conn(t, embeddedtest.Server(t))
	s := open(t, nc)
	agg := events.NodeAggregate("web-1")
	seq, err := s.Append(ctx, agg, 0, "cmd-1", enrolled("web-1"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 1100 {
		recs, version, err := s.Load(ctx, agg)
		if err != nil || len(recs) != 1 || version != seq {
			t.Fatalf("load %d: %d events at %d (want 1 at %d): %v", i, len(recs), version, seq, err)
		}
	}
	if n := consumers(t, nc); n != 0 {
		t.Fatalf("1,100 loads left %d consumer(s) on the stream", n)
	}
}

// consumers is how many consumers the stream has now.
func consumers(t *testing.T, nc *nats.Conn) int {
	t.Helper()
	js, _ := jetstream.New(nc)
	st, err := js.Stream(context.Background(), events.Stream)
	if err != nil {
		t.Fatal(err)
	}
	return st.CachedInfo().State.Consumers
}

// A load of an aggregate longer than one batched read answers every event.
func TestLoadingALongAggregate(t *testing.T) {
	ctx := context.Background()
	s := open(t, embeddedtest.Conn(t, embeddedtest.Server(t)))
	agg := events.NodeAggregate("web-1")
	version, err := s.Append(ctx, agg, 0, "enroll", enrolled("web-1"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2500 {
		if version, err = s.Append(ctx, agg, version, fmt.Sprintf("assign-%d", i), events.ModuleAssigned{Node: "web-1", Module: "m", Build: "b"}); err != nil {
			t.Fatal(err)
		}
	}
	recs, got, err := s.Load(ctx, agg)
	if err != nil || len(recs) != 2501 || got != version || recs[2500].Seq != version {
		t.Fatalf("load: %d events at %d (want 2501 at %d): %v", len(recs), got, version, err)
	}
}

// A read leaves no consumer on the stream once it returns, whether it ran
// to the end, was stopped by its callback or followed until cancelled: the
// server keeps a stopped ordered consumer five minutes, so every audit,
// verify, rebuild and as-of fold left one, and a thousand of them in five
// minutes would refuse the next (the stream's consumer limit).
func TestReadsLeaveNoConsumer(t *testing.T) {
	ctx := context.Background()
	nc := embeddedtest.Conn(t, embeddedtest.Server(t))
	s := open(t, nc)
	for i := range 5 {
		name := fmt.Sprintf("n%d", i)
		if _, err := s.Append(ctx, events.NodeAggregate(name), 0, "c-"+name, enrolled(name)); err != nil {
			t.Fatal(err)
		}
	}
	stop := errors.New("enough")
	for i := range 20 {
		if err := s.Read(ctx, store.ReadOptions{From: 1}, func(store.Msg) error { return nil }); err != nil {
			t.Fatalf("read %d: %v", i, err)
		}
		if err := s.Read(ctx, store.ReadOptions{From: 2}, func(store.Msg) error { return stop }); !errors.Is(err, stop) {
			t.Fatalf("stopped read %d: %v", i, err)
		}
		fctx, cancel := context.WithCancel(ctx)
		err := s.Read(fctx, store.ReadOptions{From: 1, Follow: true}, func(m store.Msg) error {
			if m.Pending == 0 {
				cancel()
			}
			return nil
		})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("following read %d: %v", i, err)
		}
	}
	if n := consumers(t, nc); n != 0 {
		t.Fatalf("60 reads left %d consumer(s) on the stream", n)
	}
}
