package wire

import "errors"

// Error codes on the wire (Nats-Service-Error-Code), HTTP-like so that
// `nats micro` users read them at a glance.
const (
	// KindHeader carries a refusal's kind (aggregates.Kind) beside its
	// code: the code says how a client treats it, the kind what it was.
	KindHeader     = "Mesh-Error-Kind"
	CodeBadRequest = "400"
	CodeNotFound   = "404"
	CodeConflict   = "409"
	// CodeForbidden: the caller's role does not allow the verb (issue 33).
	CodeForbidden = "403"
	CodeInternal  = "500"
	// CodeUnavailable: the controller serves reads only (its fold stopped).
	CodeUnavailable = "503"
	// CodeCut: a write was cut while it waited on the bus, which stopped
	// taking events (ErrBusDown): what it appended before is in the log,
	// what it was appending may or may not be, so the client says its
	// outcome is unknown with what the log holds.
	CodeCut = "504"
)

// ErrReadOnly: the controller's fold has stopped, so it serves what it has
// folded and refuses every write: a decision taken on read models that do
// not hold the whole log could contradict it. It is declared here, beside
// CodeUnavailable, because both sides name it: the controller refuses
// with it, and the client gives it back for that code, so errors.Is sees
// one error on both sides of the bus.
var ErrReadOnly = errors.New("the controller is serving read-only")
