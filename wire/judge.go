package wire

// JudgeRequest names a message of the stream by its sequence.
type JudgeRequest struct {
	Seq uint64 `json:"seq"`
}

// Judgement is how the fold took a message: a fact, or set aside as
// foreign, with why.
type Judgement struct {
	Seq     uint64 `json:"seq"`
	Foreign bool   `json:"foreign"`
	Reason  string `json:"reason,omitempty"`
}
