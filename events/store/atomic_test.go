package store_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/meshctl/mesh/embedded/embeddedtest"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/events/store"
)

func batchOf(names ...string) []store.One {
	var items []store.One
	for _, n := range names {
		items = append(items, store.One{Aggregate: events.NodeAggregate(n), Event: enrolled(n)})
	}
	return items
}

// A bulk verb's batch lands whole: each aggregate checked against its own
// expectation, and one stale expectation stores none of the batch.
func TestAppendAtomicIsAllOrNothingAcrossAggregates(t *testing.T) {
	ctx := context.Background()
	s := open(t, embeddedtest.Conn(t, embeddedtest.Server(t)))
	if _, err := s.Append(ctx, events.NodeAggregate("taken"), 0, "cmd-0", enrolled("taken")); err != nil {
		t.Fatal(err)
	}
	// "taken" is expected empty, but holds an event: the whole batch fails.
	_, err := s.AppendAtomic(ctx, "bulk-1", batchOf("a-1", "taken", "a-3"))
	if !errors.Is(err, store.ErrConflict) {
		t.Fatalf("a batch with one stale expectation: err = %v, want ErrConflict", err)
	}
	if st, _ := s.State(ctx); st.Msgs != 1 {
		t.Fatalf("after a refused batch the stream holds %d messages, want the 1 before it", st.Msgs)
	}
	names := make([]string, 300)
	for i := range names {
		names[i] = fmt.Sprintf("n-%03d", i)
	}
	seq, err := s.AppendAtomic(ctx, "bulk-2", batchOf(names...))
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := s.State(ctx); st.Msgs != 301 || seq != 301 {
		t.Fatalf("after a batch of 300: %d messages, last sequence %d; want 301 and 301", st.Msgs, seq)
	}
	// The same batch again (a retry whose answer was lost) lands nothing
	// more and answers where it landed.
	again, err := s.AppendAtomic(ctx, "bulk-2", batchOf(names...))
	if err != nil || again != seq {
		t.Fatalf("retried batch: seq %d err %v; want %d and no error", again, err, seq)
	}
	if st, _ := s.State(ctx); st.Msgs != 301 {
		t.Fatalf("a retried batch stored again: %d messages", st.Msgs)
	}
	if _, err := s.AppendAtomic(ctx, "bulk-3", batchOf("x", "x")); err == nil {
		t.Fatal("a batch naming one aggregate twice was taken")
	}
}
