package projections

import (
	"github.com/cockroachdb/pebble/v2"
	"github.com/meshctl/mesh/events"
)

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
	return getOne[Seat](v.r, seatKey(name))
}
