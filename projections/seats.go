package projections

import (
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/meshctl/mesh/events"
)

// Seat is one seat's row (issue 18): its holder, a handover under way, and
// Version, the sequence of its aggregate's last event (the expectation of
// its next).
type Seat struct {
	Seat   string    `json:"seat"`
	Node   string    `json:"node,omitempty"` // the holder; "" when free
	Module string    `json:"module,omitempty"`
	Since  time.Time `json:"since"`
	// HandoverTo is where a handover under way moves it; HandoverSeq the
	// stream sequence it started at (what the holder is sent after it is
	// what it must apply); Force: without waiting for the holder.
	HandoverTo  string    `json:"handover_to,omitempty"`
	HandoverSeq uint64    `json:"handover_seq,omitempty"`
	HandoverAt  time.Time `json:"handover_at,omitzero"`
	Force       bool      `json:"force,omitempty"`
	// TakenSeq is where the holder took it by a handover: until the holder
	// is sent a declaration after it, the handover's last step (sending
	// the holder and its consumers) is still to be taken.
	TakenSeq uint64 `json:"taken_seq,omitempty"`
	// Why is why it was last let go, when it is free.
	Why     string `json:"why,omitempty"`
	Version uint64 `json:"version"`
}

func seatKey(name string) []byte { return append([]byte{prefixSeat}, name...) }

// foldSeats keeps each seat's row.
func foldSeats(b *pebble.Batch, rec events.Recorded) error {
	r, ok := events.Rights[rec.Event.EventType()]
	if !ok || r.Kind != events.KindSeat {
		return nil
	}
	name := r.Name(rec.Event)
	var s Seat
	if _, err := getJSON(b, seatKey(name), &s); err != nil {
		return err
	}
	at := rec.Envelope.OccurredAt
	switch ev := rec.Event.(type) {
	case events.SeatTaken:
		s = Seat{Node: ev.Node, Module: ev.Module, Since: at}
	case events.SeatHandoverStarted:
		if s.HandoverTo != ev.To {
			s.HandoverSeq, s.HandoverAt = rec.Seq, at
		}
		s.HandoverTo, s.Force = ev.To, s.Force || ev.Force
	case events.SeatHandedOver:
		s = Seat{Node: ev.To, Module: ev.Module, Since: at, TakenSeq: rec.Seq}
	case events.SeatReleased:
		s = Seat{Since: at, Why: ev.Why}
	}
	s.Seat, s.Version = name, rec.Seq
	return putJSON(b, seatKey(name), s)
}

// Seats lists every seat ever claimed, by name.
func (v *View) Seats() ([]Seat, error) { return decodeRows[Seat](v.r, prefixSeat) }

// Seat reads one seat.
func (v *View) Seat(name string) (Seat, bool, error) {
	var s Seat
	found, err := getJSON(v.r, seatKey(name), &s)
	return s, found, err
}
