package events

// KindForeign is the aggregate kind of the operator's answers to foreign
// messages.
const KindForeign = "foreign"

// ForeignAggregate holds every acknowledgement of foreign messages: one
// aggregate, so acknowledgements are ordered and each is checked against
// the one before.
func ForeignAggregate() AggregateID { return AggregateID{Kind: KindForeign, ID: "acks"} }

// ForeignAcknowledged: the operator has seen these foreign messages (by
// stream sequence). They stay in the foreign read model and in audit;
// status stops counting them against the mesh.
type ForeignAcknowledged struct {
	Seqs []uint64 `json:"seqs"`
}

func (ForeignAcknowledged) EventType() string { return "ForeignAcknowledged" }

// ReportKeyRecorded: a node's agent signs its reports with Key from now on.
// The agent makes the key itself and keeps it; the controller never holds
// it, so a report that verifies against it is the node's word, not one the
// controller could have made. The record is signed by Key itself (the
// agent holds it) and carries the MAC of the node's join string (the
// holder of the join string recorded it), so on an open bus nobody else
// can record a key for the node.
type ReportKeyRecorded struct {
	Node string `json:"node"`
	Key  string `json:"key"`
}

func (ReportKeyRecorded) EventType() string { return "ReportKeyRecorded" }

// The headers that prove a message's writer (rules 19 and 20). Headers
// travel and are stored with the message, and backup and restore keep them.
//
// SignerHeader and SignatureHeader: a report's signer (an nkey) and its
// ed25519 signature of exactly the message's data, in standard base64.
// MACHeader: a keyed sha256 of the subject and data, by the controller's log
// key on its events and by the node's report key on a node's reports.
const (
	SignerHeader    = "Mesh-Signer"
	SignatureHeader = "Mesh-Signature"
	MACHeader       = "Mesh-Mac"
	// VoucherHeader: on a standing a running module signs with its own
	// key, its node's bus key's signature of that key (declaration.Voucher):
	// what ties a module's key to a node that made its own keys.
	VoucherHeader = "Mesh-Voucher"
)
