package wire

// Audit is what proving one node's record found.
type Audit struct {
	Node         string   `json:"node"`
	Declarations int      `json:"declarations"`
	Reports      int      `json:"reports"`
	Keys         []string `json:"keys"`        // controller keys in force over its declarations
	ReportKeys   []string `json:"report_keys"` // the keys it signed its reports with
	// OwnKeys: the node made its keys and enrolled them with a token
	// (issue 29); Rekeys are the events at which an operator's re-key
	// token gave it new ones.
	OwnKeys bool     `json:"own_keys"`
	Rekeys  []uint64 `json:"rekeys,omitempty"`
	// AskedBy counts its declarations by who asked for each (issue 33):
	// an operator, or the actor that sent by itself (reconciler, a
	// rollout); sends that name no one are not counted.
	AskedBy  map[string]int `json:"asked_by,omitempty"`
	OK       bool           `json:"ok"`
	Break    string         `json:"break,omitempty"`
	BreakSeq uint64         `json:"break_seq,omitempty"`
	// Foreign are the foreign messages that touch the node.
	Foreign []ForeignMessage `json:"foreign"`
}

// AuditReport is `mesh audit --json`: one node's audit, or the whole mesh's.
type AuditReport struct {
	Nodes   []Audit          `json:"nodes"`
	Foreign []ForeignMessage `json:"foreign"`
	OK      bool             `json:"ok"`
	Events  uint64           `json:"events"` // messages read
	Seconds float64          `json:"seconds"`
	// Rate is events read and checked a second; SignatureRate what this
	// machine checks of bare ed25519 signatures a second, for scale.
	Rate          float64 `json:"rate"`
	SignatureRate float64 `json:"signature_rate"`
}

// AuditRequest asks for one node's audit, or with no Node the whole mesh's.
type AuditRequest struct {
	Node     string `json:"node,omitempty"`
	Progress string `json:"progress,omitempty"`
}
