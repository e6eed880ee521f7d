package wire

// RotateRequest moves the credentials Provider mints for Consumer to a new
// generation and sends both ends together (rule 7).
type RotateRequest struct {
	CommandID string `json:"command_id"`
	Provider  string `json:"provider"`
	Consumer  string `json:"consumer"`
}

// RotateReply is the generation the credentials moved to, the event that
// recorded it, and the declaration each end was sent in the same write.
type RotateReply struct {
	Provider   string       `json:"provider"`
	Consumer   string       `json:"consumer"`
	Generation uint64       `json:"generation"`
	Seq        uint64       `json:"seq"`
	Sent       []PushedNode `json:"sent"`
}
