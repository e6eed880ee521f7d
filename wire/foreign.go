package wire

// ForeignList is `mesh foreign list --json`: every foreign message (rule
// 19), acknowledged or not, by stream sequence.
type ForeignList struct {
	Foreign []ForeignMessage `json:"foreign"`
	Open    int              `json:"open"`
}

// AckRequest acknowledges foreign messages (and floods) by stream
// sequence, every one not yet acknowledged (All), or every one between From
// and To, both included: one of the three.
type AckRequest struct {
	CommandID string   `json:"command_id"`
	Seqs      []uint64 `json:"seqs"`
	All       bool     `json:"all,omitempty"`
	From      uint64   `json:"from,omitempty"`
	To        uint64   `json:"to,omitempty"`
}

// Acked says what an acknowledgement did: the messages it acknowledged, and
// those acknowledged before (nothing to do for them).
type Acked struct {
	Seq          uint64   `json:"seq"`
	Acknowledged []uint64 `json:"acknowledged"`
	Already      []uint64 `json:"already"`
}
