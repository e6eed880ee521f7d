package aggregates

import (
	"github.com/meshctl/mesh/events"
)

// Seat is one seat (rule 24): which module on which node holds it, and a
// handover under way. One holder at a time: a claim while another holds
// it is refused, naming the holder; a handover releases before it
// acquires.
type Seat struct {
	Name           string
	Node, Module   string // the holder; "" when the seat is free
	HandoverTo     string // "" unless a handover is under way
	HandoverForced bool
	Version        uint64
}

// NewSeat is the seat called name before any of its events.
func NewSeat(name string) *Seat { return &Seat{Name: name} }

// Apply folds one of the seat's events.
func (s *Seat) Apply(rec events.Recorded) {
	switch ev := rec.Event.(type) {
	case events.SeatTaken:
		s.Node, s.Module, s.HandoverTo = ev.Node, ev.Module, ""
	case events.SeatHandoverStarted:
		s.HandoverTo, s.HandoverForced = ev.To, ev.Force
	case events.SeatHandedOver:
		s.Node, s.HandoverTo, s.HandoverForced = ev.To, "", false
	case events.SeatReleased:
		s.Node, s.Module, s.HandoverTo, s.HandoverForced = "", "", "", false
	}
	s.Version = rec.Seq
}

// Claim decides module on node claiming the seat: taken when free,
// nothing to do when that instance holds it, refused (naming the holder)
// when another does or a handover is under way.
func (s *Seat) Claim(node, module string) ([]events.Event, error) {
	switch {
	case s.Node == node && s.Module == module && s.HandoverTo == "":
		return nil, nil
	case s.HandoverTo != "":
		return nil, refuse("claim seat", s.Name, ErrNameTaken, "it is being handed over from %s to %s; wait for that to finish (mesh seat show %s)", s.Node, s.HandoverTo, s.Name)
	case s.Node != "":
		return nil, refuse("claim seat", s.Name, ErrNameTaken, "%s on %s holds it, and a seat has one holder; move it with mesh seat handover %s --to %s",
			s.Module, s.Node, s.Name, node)
	}
	return []events.Event{events.SeatTaken{Seat: s.Name, Node: node, Module: module}}, nil
}

// Handover decides moving the seat to node (force: without waiting for
// the holder, whose machine the operator declared lost). Asking again for
// the handover under way is nothing to do, unless it now forces it.
func (s *Seat) Handover(to string, force bool) ([]events.Event, error) {
	switch {
	case s.Node == "":
		return nil, refuse("hand over seat", s.Name, ErrInvalid, "nobody holds it; assign a module that claims it to %s instead", to)
	case s.Node == to && s.HandoverTo == "":
		return nil, nil
	case s.HandoverTo != "" && s.HandoverTo != to:
		return nil, refuse("hand over seat", s.Name, ErrInvalid, "it is being handed over to %s already; wait for that, then hand it on", s.HandoverTo)
	case s.HandoverTo == to && (!force || s.HandoverForced):
		return nil, nil
	}
	return []events.Event{events.SeatHandoverStarted{Seat: s.Name, Module: s.Module, From: s.Node, To: to, Force: force}}, nil
}

// Release decides the holder letting the seat go (its module unassigned
// from node, or node retired): nothing to do when node does not hold it.
func (s *Seat) Release(node, why string) []events.Event {
	if s.Node != node || node == "" {
		return nil
	}
	return []events.Event{events.SeatReleased{Seat: s.Name, Node: node, Module: s.Module, Why: why}}
}
