package store_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/meshctl/mesh/embedded/embeddedtest"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/events/store"
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
		if want := items[i].Aggregate.Filter(); !matches(want, m.Subject) {
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
}

// An append nobody acknowledges (no stream takes its subject) is that
// append's error, said promptly, and not a wait for ever.
func TestAppendManyWithNoStreamToAnswerFailsEachAppend(t *testing.T) {
	ctx := events.WithBy(context.Background(), "alice")
	srv := embeddedtest.Server(t)
	nc := embeddedtest.Conn(t, srv)
	s := open(t, nc)
	js, _ := jetstream.New(nc)
	if err := js.DeleteStream(ctx, events.Stream); err != nil {
		t.Fatal(err)
	}
	items := []store.One{
		{Aggregate: events.NodeAggregate("web-1"), CommandID: "enrol-1", Event: enrolled("web-1")},
		{Aggregate: events.NodeAggregate("web-2"), CommandID: "enrol-2", Event: enrolled("web-2")},
	}
	out, err := s.AppendMany(ctx, items)
	if err != nil {
		t.Fatal(err)
	}
	for i, o := range out {
		if o.Err == nil || o.Seq != 0 {
			t.Errorf("append %d with no stream: sequence %d, %v, want an error", i, o.Seq, o.Err)
		}
	}
}

// matches reports whether subject is under filter (a trailing ">").
func matches(filter, subject string) bool {
	prefix := filter[:len(filter)-1]
	return len(subject) > len(prefix) && subject[:len(prefix)] == prefix
}
