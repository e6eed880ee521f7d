package events

import "time"

// Enrolment tokens and the keys a node makes itself (issue 29). A machine is
// handed a token, not a key: its agent makes every key it holds on its first
// start (its bus identity, its report key, the key what is sealed to it
// opens with, its overlay key) and sends only their public halves, with the
// token, to the controller, which records them. From then on nothing the
// controller holds, its key included, can make that node's report or open
// what is sealed to it: the log says which keys are the node's, and only the
// node has their private halves.

// KindToken is the aggregate kind of an enrolment token: its uses are
// counted by appends that expect its version, so two machines racing for
// the last use of a token cannot both have it.
const KindToken = "token"

// TokenAggregate is the token with id.
func TokenAggregate(id string) AggregateID { return AggregateID{Kind: KindToken, ID: id} }

// TokenCreated: the operator made an enrolment token. Hash is the hex
// sha256 of its secret: the log never holds the secret itself, so neither a
// reader of the stream nor a backup can enrol a machine with it.
type TokenCreated struct {
	ID           string            `json:"id"`
	Hash         string            `json:"hash"`
	Uses         int               `json:"uses"`
	Expires      time.Time         `json:"expires"`
	Labels       map[string]string `json:"labels"`
	Capabilities []string          `json:"capabilities"`
	// Node is the one name the token enrols ("" for any name the machine
	// asks for); Rekey gives that enrolled node new keys (a wiped machine).
	Node  string `json:"node"`
	Rekey bool   `json:"rekey"`
}

func (TokenCreated) EventType() string { return "TokenCreated" }

// TokenUsed: a machine enrolled (or was re-keyed) as Node with the token.
// Appended in the same atomic batch as the node's keys.
type TokenUsed struct {
	ID   string `json:"id"`
	Node string `json:"node"`
}

func (TokenUsed) EventType() string { return "TokenUsed" }

// TokenRevoked: the operator withdrew the token's unused uses.
type TokenRevoked struct {
	ID string `json:"id"`
}

func (TokenRevoked) EventType() string { return "TokenRevoked" }

// NodeKeysRecorded: Node's agent made these keys (public halves only) and
// enrolled with Token. Bus is its nkey on the bus, Report the key its
// reports are signed with, Seal its X25519 key that declarations seal files
// to, Overlay its WireGuard public key. Rekey: keys it held before are no
// longer its (recorded by an operator's re-key token).
type NodeKeysRecorded struct {
	Node    string `json:"node"`
	Bus     string `json:"bus"`
	Report  string `json:"report"`
	Seal    string `json:"seal"`
	Overlay string `json:"overlay"`
	Token   string `json:"token"`
	Rekey   bool   `json:"rekey"`
}

func (NodeKeysRecorded) EventType() string { return "NodeKeysRecorded" }

// KindKeys is the aggregate kind of a node's own keys: apart from the
// node's, so that a new node's enrolment and its keys land in one atomic
// batch (one event an aggregate), and a re-key expects the keys it replaces.
const KindKeys = "keys"

// KeysAggregate is node's own keys.
func KeysAggregate(node string) AggregateID { return AggregateID{Kind: KindKeys, ID: node} }

// EnrolPrefix is where an agent holding a token asks to be enrolled:
// EnrolSubject(node), a request the controller answers. Not in any stream.
const EnrolPrefix = "mesh.enrol"

// EnrolSubject is where the machine that would be node asks for it.
func EnrolSubject(node string) string { return EnrolPrefix + "." + node }
