package events

import (
	"slices"
	"time"
)

// KindForeign is the aggregate kind of the operator's answers to foreign
// messages.
const KindForeign = "foreign"

// ForeignAggregate holds every acknowledgement of foreign messages: one
// aggregate, so acknowledgements are ordered and each is checked against
// the one before.
func ForeignAggregate() AggregateID { return AggregateID{Kind: KindForeign, ID: "acks"} }

// ForeignAcknowledged: the operator has seen these foreign messages (by
// stream sequence), and the floods (NodeFlooded) among them. They stay in
// the foreign read model and in audit; status stops counting them against
// the mesh.
//
// From and To (issue 29), when To is set, acknowledge every one between
// them, both included, that was not acknowledged yet: one event however
// many there are (23,812 took as many commands, one sequence each). Every
// message they cover precedes the acknowledgement in the stream, so a
// replay marks exactly the same ones.
type ForeignAcknowledged struct {
	Seqs []uint64 `json:"seqs"`
	From uint64   `json:"from,omitempty"`
	To   uint64   `json:"to,omitempty"`
}

// NodeFlooded (issue 29): a node's identity wrote more on its report
// subjects within Window than any agent does (foreign messages, or report
// bytes), so the controller cut its connections and refuses it at connect
// until Until. An event of the foreign aggregate, since the operator
// acknowledges it with the foreign messages it wrote: status names it until
// then.
type NodeFlooded struct {
	Node    string    `json:"node"`
	Reports int       `json:"reports"` // messages on its report subjects in the window
	Foreign int       `json:"foreign"` // of which set aside as foreign
	Bytes   int64     `json:"bytes"`
	From    time.Time `json:"from"` // the window, by the stream's clock
	To      time.Time `json:"to"`
	Until   time.Time `json:"until"`
	// Cut says whether this controller could cut its live connections (an
	// embedded bus), or only refuses its next connect (a cluster).
	Cut bool `json:"cut"`
}

func (NodeFlooded) EventType() string { return "NodeFlooded" }

func (ForeignAcknowledged) EventType() string { return "ForeignAcknowledged" }

// Covers reports whether the acknowledgement names seq or its range holds it.
func (a ForeignAcknowledged) Covers(seq uint64) bool {
	return a.To > 0 && a.From <= seq && seq <= a.To || slices.Contains(a.Seqs, seq)
}

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
