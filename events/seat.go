package events

// Seats (issue 18, rule 24): roles one module instance holds mesh-wide at
// a time, claimed by a manifest's "claims". Each seat is an aggregate of
// its own (mesh.ev.seat.<name>.>): its holder changes only by an append
// expecting its version, in the same atomic batch as the assignment that
// gives or takes the claiming module, so two holders are never recorded.

// KindSeat is the aggregate kind of seats.
const KindSeat = "seat"

// SeatAggregate is the seat called name.
func SeatAggregate(name string) AggregateID { return AggregateID{Kind: KindSeat, ID: name} }

// SeatTaken: Module on Node holds the seat from now on (it was free).
type SeatTaken struct {
	Seat   string `json:"seat"`
	Node   string `json:"node"`
	Module string `json:"module"`
}

// SeatHandoverStarted: the seat is to move from From to To. From is sent a
// declaration without the claiming module; only once it applied it (or
// Force: the operator declared From lost) does To get the seat.
type SeatHandoverStarted struct {
	Seat   string `json:"seat"`
	Module string `json:"module"`
	From   string `json:"from"`
	To     string `json:"to"`
	Force  bool   `json:"force,omitempty"`
}

// SeatHandedOver: From let the seat go (it applied the declaration without
// it, or was forced) and To holds it, in one event, appended with the
// claiming module's moves from From to To.
type SeatHandedOver struct {
	Seat   string `json:"seat"`
	Module string `json:"module"`
	From   string `json:"from"`
	To     string `json:"to"`
	Forced bool   `json:"forced,omitempty"`
}

// SeatReleased: the holder let the seat go (its module unassigned, its node
// retired): nobody holds it, and its work queue keeps what is asked of it.
type SeatReleased struct {
	Seat   string `json:"seat"`
	Node   string `json:"node"`
	Module string `json:"module"`
	Why    string `json:"why"`
}

func (SeatTaken) EventType() string           { return "SeatTaken" }
func (SeatHandoverStarted) EventType() string { return "SeatHandoverStarted" }
func (SeatHandedOver) EventType() string      { return "SeatHandedOver" }
func (SeatReleased) EventType() string        { return "SeatReleased" }

// SeatStream is the stream of a seat's work queue, and SeatWork the
// subject work for it is put on.
func SeatStream(seat string) string { return "MESH_SEAT_" + upperToken(seat) }

// SeatWork is the subject work asked of a seat is published on.
func SeatWork(seat string) string { return "mesh.seat." + seat + ".work" }

func upperToken(s string) string {
	b := []byte(s)
	for i, c := range b {
		switch {
		case c >= 'a' && c <= 'z':
			b[i] = c - 'a' + 'A'
		case c == '-':
			b[i] = '_'
		}
	}
	return string(b)
}
