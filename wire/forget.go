package wire

// ForgetRequest forgets versions of one secret setting (rule 21): every
// version ever recorded, or only Version when it is given.
type ForgetRequest struct {
	CommandID string `json:"command_id"`
	Node      string `json:"node"`
	Module    string `json:"module"`
	Setting   string `json:"setting"`
	Version   int    `json:"version,omitempty"`
}

// Forgotten answers ForgetRequest: the versions forgotten now, those
// forgotten before (nothing to do), and whether the current value was
// among them (the assignment cannot be composed until it is set again).
type Forgotten struct {
	Forgotten []int  `json:"forgotten"`
	Already   []int  `json:"already"`
	Current   bool   `json:"current"`
	Seq       uint64 `json:"seq,omitempty"`
}
