package events

import "time"

// DeclarationSent: the controller signed a declaration for a node and this
// event is its delivery: the agent reads it from the stream, so sending and
// recording are one act. It is an event of the node's aggregate, appended
// expecting the version the declaration was composed at.
type DeclarationSent struct {
	Node          string `json:"node"`
	Sequence      uint64 `json:"sequence"`
	Digest        string `json:"digest"`         // sha256 of exactly Declaration's bytes
	ContentDigest string `json:"content_digest"` // sha256 of the content without sequence, chain, time
	By            string `json:"by"`             // "push", "declare", "reconciler" or "rollout ID" (the rollout whose step sent it)
	Resources     int    `json:"resources"`
	// The sealed declaration: the signed bytes, the signature, the signer,
	// and the proof that leads from the bytes to the root of the window
	// the signature covers (declaration.SealMany; none for one sealed
	// alone, so a send sealed before windows keeps its bytes).
	Declaration []byte `json:"declaration"`
	Signature   []byte `json:"signature"`
	Key         string `json:"key"`
	Proof       []byte `json:"proof,omitempty"`
}

// ByHand is DeclarationSent.By of a hand-written declaration (mesh
// declare). A node whose last declaration is one is held: every push that
// does not name it leaves it out, so the hand's work is not overwritten by
// a push --behind or a rollout's wave (issue 31).
const ByHand = "declare"

// ByReconciler is DeclarationSent.By of a declaration the controller sent
// by itself (mesh up --reconcile, rule 27), so history, events and status
// never credit an operator with a send nobody asked for.
const ByReconciler = "reconciler"

// ControllerKeyRecorded: the controller signs with this public key from now
// on, so history says which key signed what.
type ControllerKeyRecorded struct {
	PublicKey string `json:"public_key"`
}

// Reports, written by a node's agent under mesh.rp.<node>.<Type>.

// DeclarationApplied: the node holds exactly the declaration with Digest.
type DeclarationApplied struct {
	Node     string `json:"node"`
	Sequence uint64 `json:"sequence"`
	Digest   string `json:"digest"`
	Changed  int    `json:"changed"` // resources written or removed; 0 when it already held them
}

// DeclarationFailed: the node tried and some resources failed.
type DeclarationFailed struct {
	Node     string            `json:"node"`
	Sequence uint64            `json:"sequence"`
	Digest   string            `json:"digest"`
	Failed   []ResourceFailure `json:"failed"`
}

// ResourceFailure is one resource that could not be applied, and why.
type ResourceFailure struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// DeclarationRefused: the node would not apply it at all, and why. Highest is
// the highest sequence the node has applied, so that a controller whose log
// fell behind can number its next declaration above it.
type DeclarationRefused struct {
	Node     string `json:"node"`
	Sequence uint64 `json:"sequence"`
	Digest   string `json:"digest"`
	Reason   string `json:"reason"`
	Highest  uint64 `json:"highest"`
}

// ApplyInterrupted: the node's agent began applying the declaration of
// Sequence (Digest) at BeganAt and stopped before it finished (killed, its
// machine lost power). Each file is written whole, so the root held some
// of that declaration's files and some of the one before: this says the
// window existed. Said by the agent's next start, before it applies again;
// the report of the apply that completes it follows.
type ApplyInterrupted struct {
	Node     string    `json:"node"`
	Sequence uint64    `json:"sequence"`
	Digest   string    `json:"digest"`
	BeganAt  time.Time `json:"began_at"`
}

func (ApplyInterrupted) EventType() string { return "ApplyInterrupted" }

func (DeclarationSent) EventType() string       { return "DeclarationSent" }
func (ControllerKeyRecorded) EventType() string { return "ControllerKeyRecorded" }
func (DeclarationApplied) EventType() string    { return "DeclarationApplied" }
func (DeclarationFailed) EventType() string     { return "DeclarationFailed" }
func (DeclarationRefused) EventType() string    { return "DeclarationRefused" }

// KindController is the aggregate kind of the controller's identity.
const KindController = "controller"

// ControllerAggregate holds the keys the controller has signed with.
func ControllerAggregate() AggregateID { return AggregateID{Kind: KindController, ID: "keys"} }

// ReportSubject is where a node's agent publishes a report of type typ.
func ReportSubject(node, typ string) string { return ReportPrefix + "." + node + "." + typ }

// ReportFilter matches every report of one node.
func ReportFilter(node string) string { return ReportPrefix + "." + node + ".>" }

// NodeInbox is the inbox prefix of a node's connections: on a closed bus the
// only replies it may read are those under it (rule 18).
func NodeInbox(node string) string { return "_INBOX_" + node }

// DeclarationSubject is where a node's declarations are: the agent follows it.
func DeclarationSubject(node string) string {
	return NodeAggregate(node).Subject(DeclarationSent{}.EventType())
}

// StoredPrefix is where the stream republishes each declaration once it
// has stored it (its RePublish, events/store): StoredSubject(node). What
// an agent hears there is in the log already, with its place in it
// (Nats-Sequence, Nats-Time-Stamp), so it applies it without asking the
// bus for it again: a direct get, a request and its answer a node a push,
// was most of what a real agent cost the bus beyond a simulated one
// (issue 34 point 2). Only the server publishes here: no identity's
// permissions allow it, and OperatorPermissions denies it outright.
const StoredPrefix = "mesh.told"

// StoredSubject is where node's agent hears each declaration stored.
func StoredSubject(node string) string { return StoredPrefix + "." + node }

// StoredRepublish is the stream's republish: every declaration, from its
// subject to StoredSubject of its node (the subject's third token).
func StoredRepublish() (source, destination string) {
	return DeclarationSubject("*"), StoredPrefix + ".{{wildcard(1)}}"
}

// NewestPrefix is where an agent asks the controller for its newest
// declaration when the newest message on its declaration subject is not
// one the controller signed (issue 29): a reply subject aimed there by
// another party puts such a message on any subject of the stream, and a
// node may read only the last message on its own by direct get, so it
// cannot walk back past it itself. Not in any stream.
const NewestPrefix = "mesh.newest"

// NewestSubject is where node's agent asks for its newest declaration.
func NewestSubject(node string) string { return NewestPrefix + "." + node }

// ContentKeyPrefix is where an agent asks the controller for the keys of
// the files its declaration carries sealed under secret settings' salts
// (compose.Sealed.Keys, issue 29 point 6): the keys are never in the log,
// so that erasing a salt forgets every file that printed its setting. Not
// in any stream.
const ContentKeyPrefix = "mesh.contentkey"

// ContentKeySubject is where node's agent asks for its files' content keys.
func ContentKeySubject(node string) string { return ContentKeyPrefix + "." + node }

// LogsPrefix is where the operator asks a node's agent for the recent
// output of a module's program (issue 31 point 8): the output stays on the
// node, in no stream, and only the operator may ask (busauth). Not in any
// stream.
const LogsPrefix = "mesh.logs"

// LogsSubject is where node's agent hears requests for its programs' logs.
func LogsSubject(node string) string { return LogsPrefix + "." + node }

// LogsReplyPrefix is where node's agent answers them: the request's reply
// subject must be under it (LogsReplyPrefix(node) + ".<token>"). Not the
// asker's own inbox: a node may publish to no inbox, since a reply it may
// send to whatever asked would let it answer the controller's own
// publishes it hears (busauth.NodePermissions); under its own name only
// that node may publish, and no other node may read.
func LogsReplyPrefix(node string) string { return LogsPrefix + "." + node + ".to" }

// DriftFound: what the mesh owns under the node's root was changed behind
// the agent's back (a hand edit, a removal) since the declaration of
// Sequence was applied. Corrected: the agent put it back (a corrective
// change); otherwise it only says so, and the node is drifted until the
// next apply.
type DriftFound struct {
	Node      string   `json:"node"`
	Sequence  uint64   `json:"sequence"`
	Paths     []string `json:"paths"`
	Corrected bool     `json:"corrected"`
}

func (DriftFound) EventType() string { return "DriftFound" }
