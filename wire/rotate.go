package wire

import "time"

// RotateRequest moves the credentials Provider mints for Consumer to a new
// generation and sends both ends together (rule 7).
type RotateRequest struct {
	CommandID string `json:"command_id"`
	Provider  string `json:"provider"`
	Consumer  string `json:"consumer"`
	// Overlap bounds how long the provider accepts the old credential
	// beside the new one (0: aggregates.DefaultOverlap); NoOverlap drops
	// the old at once (mesh rotate --overlap 0).
	Overlap   time.Duration `json:"overlap,omitempty"`
	NoOverlap bool          `json:"no_overlap,omitempty"`
}

// RotateReply is the generation the credentials moved to, the event that
// recorded it, and the declaration each end was sent in the same write.
type RotateReply struct {
	Provider   string       `json:"provider"`
	Consumer   string       `json:"consumer"`
	Generation uint64       `json:"generation"`
	Seq        uint64       `json:"seq"`
	Sent       []PushedNode `json:"sent"`
	// OverlapUntil is when the provider drops the old credential at the
	// latest (zero: it already did); the controller drops it sooner once
	// every consumer end applied.
	OverlapUntil time.Time `json:"overlap_until,omitzero"`
}
