package wire

import (
	"time"
)

// HandoverRequest moves a seat to a node.
type HandoverRequest struct {
	CommandID string `json:"command_id"`
	Seat      string `json:"seat"`
	To        string `json:"to"`
	// Force: do not wait for the holder to apply its declaration without
	// the seat: its machine is lost.
	Force bool `json:"force,omitempty"`
}

// SeatView is a seat, where a handover stands, and its steps in the log.
type SeatView struct {
	Seat
	// Waiting says what a handover under way waits for ("" when none).
	Waiting string     `json:"waiting,omitempty"`
	Steps   []SeatStep `json:"steps"`
}

// SeatStep is one event of a seat, as seat show lists it.
type SeatStep struct {
	Seq  uint64    `json:"seq"`
	At   time.Time `json:"at"`
	Type string    `json:"type"`
	What string    `json:"what"`
}

// SeatList is every seat ever claimed.
type SeatList struct {
	Seats []SeatView `json:"seats"`
}
