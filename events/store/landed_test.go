package store

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/meshctl/mesh/embedded/embeddedtest"
	"github.com/meshctl/mesh/events"
)

// Whether an append landed is answered from the aggregate's last event;
// when that cannot be read (the bus gone again), the answer is that it
// cannot tell, never that another writer's event is there: taken for a
// conflict, a send the stream held was composed and sent a second time.
// Fails when a read that failed answers "not ours".
func TestLandedCannotTellWithoutTheBus(t *testing.T) {
	ctx := events.WithBy(context.Background(), "alice")
	nc, cut := embeddedtest.ConnCut(t, embeddedtest.Server(t))
	s, _, err := Open(ctx, nc, StreamConfig{})
	if err != nil {
		t.Fatal(err)
	}
	agg := events.NodeAggregate("n1")
	seq, err := s.Append(ctx, agg, 0, "enrol-n1", events.NodeEnrolled{Name: "n1", Capabilities: []string{"linux"}})
	if err != nil {
		t.Fatal(err)
	}
	got, ours, err := s.landed(ctx, agg, events.EventID("enrol-n1", 0))
	if err != nil || !ours || got != seq {
		t.Fatalf("with the bus: landed %d, ours %v, %v; want %d, ours", got, ours, err, seq)
	}
	if _, ours, err := s.landed(ctx, agg, events.EventID("another", 0)); err != nil || ours {
		t.Fatalf("another command's id: ours %v, %v; want not ours", ours, err)
	}
	if got, ours, err := s.landed(ctx, events.NodeAggregate("n2"), events.EventID("enrol-n2", 0)); err != nil || ours || got != 0 {
		t.Fatalf("an aggregate with no event: %d, ours %v, %v; want nothing there, not ours", got, ours, err)
	}
	cut.Drop()
	short, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, ours, err = s.landed(short, agg, events.EventID("enrol-n1", 0))
	if !errors.Is(err, ErrUnsure) || ours || errors.Is(err, ErrConflict) {
		t.Fatalf("without the bus: ours %v, %v; want that it cannot tell", ours, err)
	}
	if !strings.Contains(err.Error(), "cannot tell whether the append landed: its expectation on node/n1") {
		t.Errorf("without the bus: %v, which does not say it cannot tell", err)
	}
}
