package aggregates

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/meshctl/mesh/events"
)

// seatAfter is seat "builder" after evs, each appended in turn.
func seatAfter(evs ...events.Event) *Seat {
	s := NewSeat("builder")
	for i, ev := range evs {
		s.Apply(events.Recorded{Seq: uint64(i + 1), Event: ev})
	}
	return s
}

var (
	taken    = events.SeatTaken{Seat: "builder", Node: "b-1", Module: "builder"}
	starting = events.SeatHandoverStarted{Seat: "builder", Module: "builder", From: "b-1", To: "b-2"}
)

// A seat has one holder (rule 24): a claim takes it only when it is free,
// is nothing to do for its holder, and is refused, naming the holder or
// the handover, otherwise. Each row fails when that rule is broken.
func TestSeatClaim(t *testing.T) {
	for _, c := range []struct {
		what         string
		seat         *Seat
		node, module string
		want         []events.Event
		refused      error
	}{
		{"free", seatAfter(), "b-1", "builder", []events.Event{taken}, nil},
		{"its holder again", seatAfter(taken), "b-1", "builder", nil, nil},
		{"another node", seatAfter(taken), "b-2", "builder", nil, ErrNameTaken},
		{"another module on the holder", seatAfter(taken), "b-1", "ci", nil, ErrNameTaken},
		{"during a handover, even the holder", seatAfter(taken, starting), "b-1", "builder", nil, ErrNameTaken},
		{"released", seatAfter(taken, events.SeatReleased{Seat: "builder", Node: "b-1"}), "b-2", "ci",
			[]events.Event{events.SeatTaken{Seat: "builder", Node: "b-2", Module: "ci"}}, nil},
	} {
		got, err := c.seat.Claim(c.node, c.module)
		if !errors.Is(err, c.refused) || (err == nil) != (c.refused == nil) {
			t.Errorf("%s: refusal %v, want kind %v", c.what, err, c.refused)
		}
		if diff := cmp.Diff(c.want, got); diff != "" {
			t.Errorf("%s: events (-want +got):\n%s", c.what, diff)
		}
	}
}

// A handover moves a held seat to one node at a time: asking again is
// nothing to do unless it now forces it; another target while one is under
// way, or a seat nobody holds, is refused.
func TestSeatHandover(t *testing.T) {
	forced := starting
	forced.Force = true
	for _, c := range []struct {
		what    string
		seat    *Seat
		to      string
		force   bool
		want    []events.Event
		refused error
	}{
		{"held", seatAfter(taken), "b-2", false, []events.Event{starting}, nil},
		{"to its holder", seatAfter(taken), "b-1", false, nil, nil},
		{"nobody holds it", seatAfter(), "b-2", false, nil, ErrInvalid},
		{"the same again", seatAfter(taken, starting), "b-2", false, nil, nil},
		{"the same, now forced", seatAfter(taken, starting), "b-2", true, []events.Event{forced}, nil},
		{"forced again", seatAfter(taken, forced), "b-2", true, nil, nil},
		{"elsewhere while one is under way", seatAfter(taken, starting), "b-3", false, nil, ErrInvalid},
		{"after it was handed over", seatAfter(taken, starting, events.SeatHandedOver{Seat: "builder", To: "b-2"}), "b-1", false,
			[]events.Event{events.SeatHandoverStarted{Seat: "builder", Module: "builder", From: "b-2", To: "b-1"}}, nil},
	} {
		got, err := c.seat.Handover(c.to, c.force)
		if !errors.Is(err, c.refused) || (err == nil) != (c.refused == nil) {
			t.Errorf("%s: refusal %v, want kind %v", c.what, err, c.refused)
		}
		if diff := cmp.Diff(c.want, got); diff != "" {
			t.Errorf("%s: events (-want +got):\n%s", c.what, diff)
		}
	}
}

// Only the holder releases: a node that does not hold the seat releases
// nothing, so unassigning elsewhere never frees another's seat.
func TestSeatRelease(t *testing.T) {
	s := seatAfter(taken)
	if evs := s.Release("b-2", "unassigned"); evs != nil {
		t.Fatalf("a node that does not hold it released %v", evs)
	}
	if evs := seatAfter().Release("", "retired"); evs != nil {
		t.Fatalf("a free seat released %v", evs)
	}
	want := []events.Event{events.SeatReleased{Seat: "builder", Node: "b-1", Module: "builder", Why: "b-1 retired"}}
	if diff := cmp.Diff(want, s.Release("b-1", "b-1 retired")); diff != "" {
		t.Fatalf("the holder's release (-want +got):\n%s", diff)
	}
}
