package store_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/meshctl/mesh/embedded/embeddedtest"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/events/store"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// AppendMany answers each append the sequence the stream stored it at,
// across more than one window of acknowledgements in flight; a stale
// expectation is that append's conflict alone; the same decisions again
// (a retried push) answer their first sequences and store nothing more.
func TestAppendManyAnswersEachAppendWhereTheStreamHoldsIt(t *testing.T) {
	ctx := events.WithBy(context.Background(), "alice")
	nc := embeddedtest.Conn(t, embeddedtest.Server(t))
	s := open(t, nc)
	const n = 2*2000 + 17 // three windows, the last a short one
	stale := map[int]bool{5: true, 2100: true, n - 1: true}
	items := make([]store.One, n)
	for i := range items {
		agg := events.NodeAggregate(fmt.Sprintf("n%d", i))
		var want uint64
		if stale[i] {
			want = 7 // nothing is there: a conflict
		}
		items[i] = store.One{Aggregate: agg, Expected: want, CommandID: fmt.Sprintf("enrol-%d", i), Event: enrolled(fmt.Sprintf("n%d", i))}
	}
	out, err := s.AppendMany(ctx, items)
	if err != nil {
		t.Fatal(err)
	}
	js, _ := jetstream.New(nc)
	st, err := js.Stream(ctx, events.Stream)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[uint64]bool{}
	for i, o := range out {
		if stale[i] {
			if !errors.Is(o.Err, store.ErrConflict) {
				t.Errorf("append %d, expecting version 7 of an empty aggregate: %v, want a conflict", i, o.Err)
			}
			continue
		}
		if o.Err != nil || o.Seq == 0 || seen[o.Seq] {
			t.Fatalf("append %d: sequence %d, %v (each append its own sequence)", i, o.Seq, o.Err)
		}
		seen[o.Seq] = true
		if i%500 != 0 {
			continue
		}
		m, err := st.GetMsg(ctx, o.Seq)
		if err != nil {
			t.Fatal(err)
		}
		if want := items[i].Aggregate.Filter(); !server.SubjectMatchesFilter(m.Subject, want) {
			t.Errorf("append %d answered sequence %d, which holds %s, not an event of %s", i, o.Seq, m.Subject, want)
		}
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := info.State.Msgs; got != uint64(n-len(stale)) {
		t.Fatalf("the stream holds %d events, want %d", got, n-len(stale))
	}

	again, err := s.AppendMany(ctx, items)
	if err != nil {
		t.Fatal(err)
	}
	for i, o := range again {
		if !stale[i] && (o.Err != nil || o.Seq != out[i].Seq) {
			t.Fatalf("append %d again: sequence %d, %v, want its first, %d", i, o.Seq, o.Err, out[i].Seq)
		}
	}
	if info, _ := st.Info(ctx); info.State.Msgs != uint64(n-len(stale)) {
		t.Fatalf("the same decisions again stored %d more events", info.State.Msgs-uint64(n-len(stale)))
	}
	if w := store.AckWindows(s); w != 0 {
		t.Errorf("%d windows of acknowledgements still registered after every append was answered", w)
	}
}

// An append no stream takes (the bus answers "no responders") is that
// append's error at once: with the wait for acknowledgements an hour, the
// answer still comes within the test's deadline.
func TestAppendManyWithNoStreamToAnswerFailsEachAppend(t *testing.T) {
	store.SetAckWait(t, time.Hour)
	ctx, cancel := context.WithTimeout(events.WithBy(context.Background(), "alice"), 30*time.Second)
	defer cancel()
	nc := embeddedtest.Conn(t, embeddedtest.Server(t))
	s := open(t, nc)
	js, _ := jetstream.New(nc)
	if err := js.DeleteStream(ctx, events.Stream); err != nil {
		t.Fatal(err)
	}
	out, err := s.AppendMany(ctx, sends(2, "web-"))
	if err != nil {
		t.Fatalf("AppendMany with no stream: %v, want each append's error", err)
	}
	for i, o := range out {
		if o.Err == nil || o.Seq != 0 {
			t.Errorf("append %d with no stream: sequence %d, %v, want an error", i, o.Seq, o.Err)
		}
	}
}

// Appends that something hears but nothing acknowledges: a cancelled
// AppendMany returns the cancellation, forgets the sends it remembered
// (so the fold reads them from the stream rather than waiting), and an
// acknowledgement that comes after changes nothing; one not cancelled
// settles them after the wait for acknowledgements, each with its error.
func TestAppendManyNobodyAcknowledgesIsSettledOrCancelled(t *testing.T) {
	ctx := events.WithBy(context.Background(), "alice")
	nc := embeddedtest.Conn(t, embeddedtest.Server(t))
	s := open(t, nc)
	s.MAC = []byte("the log's MAC key, 32 bytes long")
	s.RememberSends = true
	js, _ := jetstream.New(nc)
	if err := js.DeleteStream(ctx, events.Stream); err != nil {
		t.Fatal(err)
	}
	held := make(chan *nats.Msg, 64)
	sub, err := nc.Subscribe("mesh.ev.>", func(m *nats.Msg) { held <- m })
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()

	cctx, cancel := context.WithCancel(ctx)
	heard := make(chan []*nats.Msg, 1)
	go func() {
		var ms []*nats.Msg
		for range 3 {
			ms = append(ms, <-held)
		}
		cancel()
		heard <- ms
	}()
	if _, err := s.AppendMany(cctx, sends(3, "x-")); !errors.Is(err, context.Canceled) {
		t.Fatalf("a cancelled AppendMany answered %v, want the cancellation", err)
	}
	if n, w := store.Remembered(s), store.AckWindows(s); n != 0 || w != 0 {
		t.Fatalf("after the cancellation %d sends remembered and %d windows registered, want none", n, w)
	}
	for i, m := range <-heard {
		if err := nc.Publish(m.Reply, fmt.Appendf(nil, `{"stream":"MESH","seq":%d}`, 10+i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if n := store.Remembered(s); n != 0 {
		t.Errorf("late acknowledgements made %d sends remembered", n)
	}

	// Settling asks the stream again, synchronously, within the caller's
	// time: here a second, so that the test need not wait out a publish's.
	store.SetAckWait(t, 50*time.Millisecond)
	sctx, stop := context.WithTimeout(ctx, time.Second)
	defer stop()
	out, err := s.AppendMany(sctx, sends(3, "y-"))
	if err != nil {
		t.Fatalf("AppendMany unacknowledged: %v, want each append's error", err)
	}
	for i, o := range out {
		if o.Err == nil {
			t.Errorf("append %d never acknowledged answered sequence %d, want an error", i, o.Seq)
		}
	}
	if n, w := store.Remembered(s), store.AckWindows(s); n != 0 || w != 0 {
		t.Errorf("after settling %d sends remembered and %d windows registered, want none", n, w)
	}
}

// sends are n sends, each to a node of its own.
func sends(n int, prefix string) []store.One {
	items := make([]store.One, n)
	for i := range items {
		node := fmt.Sprintf("%s%d", prefix, i)
		sent := events.DeclarationSent{Node: node, Sequence: 1, Digest: "ab12", ContentDigest: "cd34", By: "push", Resources: 1,
			Declaration: []byte("signed bytes of " + node), Signature: []byte{1, 2, 3}, Key: "UCONTROLLER"}
		items[i] = store.One{Aggregate: events.NodeAggregate(node), CommandID: "push-" + node, Event: sent}
	}
	return items
}
