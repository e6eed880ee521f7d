package declaration

import (
	"crypto/ecdh"
	"encoding/base64"
	"errors"

	"github.com/nats-io/nkeys"
)

// Enrolment with a token (issue 29). The agent makes its node seed (an
// nkey user seed, NodeSeedFile in its state) and derives from it, on its
// machine, every key of the node: its bus key (the seed's own), its MAC and
// seal keys (ReportMACKey, SealKey and SealCurve), its overlay key
// (OverlayKey) and its modules' keys (ModuleKey). It sends the public
// halves, with the token, on events.EnrolSubject: EnrolRequest.

// NodeSeedFile is where, in an agent's state directory, the node seed the
// agent made is kept (mode 0600, never sent anywhere).
const NodeSeedFile = "node.nk"

// EnrolRequest is what an agent holding a token asks the controller.
// BusSig and ReportSig are each key's signature of Proof(): whoever sends
// it holds both private keys, so no one can record keys they do not hold.
type EnrolRequest struct {
	Mesh      string `json:"mesh"`
	Token     string `json:"token"`
	Node      string `json:"node"`
	Bus       string `json:"bus"`
	Report    string `json:"report"`
	Seal      string `json:"seal"`
	Overlay   string `json:"overlay"`
	BusSig    string `json:"bus_sig"`
	ReportSig string `json:"report_sig"`
}

// EnrolReply is the controller's answer: the node's name and the sequence
// its keys landed at, and the key its liveness beats are MAC'd with (a
// controller-derived key: a beat is checked 20,000 times a second at
// 100,000 nodes, too often for a signature, and says only "alive", never
// what the node did). Error, when set, is why not, in one sentence.
type EnrolReply struct {
	Node string `json:"node"`
	Seq  uint64 `json:"seq"`
	Beat string `json:"beat"`
	// Rekeyed: the node had keys before, which are not its any more.
	Rekeyed bool   `json:"rekeyed,omitempty"`
	Error   string `json:"error,omitempty"`
}

// Proof is what the two keys sign: every other field, in order.
func (r EnrolRequest) Proof() []byte {
	return []byte("mesh enrol\x00" + r.Mesh + "\x00" + r.Token + "\x00" + r.Node + "\x00" + r.Bus + "\x00" + r.Report + "\x00" + r.Seal + "\x00" + r.Overlay)
}

// Sign fills the two signatures.
func (r *EnrolRequest) Sign(bus, report nkeys.KeyPair) error {
	b, err := bus.Sign(r.Proof())
	if err != nil {
		return err
	}
	p, err := report.Sign(r.Proof())
	if err != nil {
		return err
	}
	r.BusSig, r.ReportSig = base64.StdEncoding.EncodeToString(b), base64.StdEncoding.EncodeToString(p)
	return nil
}

// Check holds the request's keys to their forms and signatures.
func (r EnrolRequest) Check() error {
	switch {
	case !nkeys.IsValidPublicUserKey(r.Bus):
		return errors.New("its bus key is not an nkey user key")
	case !nkeys.IsValidPublicUserKey(r.Report):
		return errors.New("its report key is not an nkey user key")
	case !Verify(r.Bus, r.Proof(), r.BusSig):
		return errors.New("its bus key did not sign it")
	case !Verify(r.Report, r.Proof(), r.ReportSig):
		return errors.New("its report key did not sign it")
	}
	if _, err := curvePublic(r.Seal); err != nil {
		return errors.New("its seal key is not an X25519 public key")
	}
	if _, err := curvePublic(r.Overlay); err != nil {
		return errors.New("its overlay key is not an X25519 public key")
	}
	return nil
}

// sealCurveLabel derives a node's X25519 seal key from its bus key.
const sealCurveLabel = "declaration seal x25519"

// SealCurve is the X25519 key what is sealed to a node that made its own
// keys opens with: derived from its seed, on its machine only.
func SealCurve(bus nkeys.KeyPair) (*ecdh.PrivateKey, error) {
	raw, err := rawSeed(bus)
	if err != nil {
		return nil, err
	}
	return ecdh.X25519().NewPrivateKey(deriveRaw(raw, sealCurveLabel))
}

// CurvePublic is an X25519 public key as the log records it.
func CurvePublic(k *ecdh.PrivateKey) string {
	return base64.StdEncoding.EncodeToString(k.PublicKey().Bytes())
}

func curvePublic(s string) (*ecdh.PublicKey, error) {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, err
	}
	return ecdh.X25519().NewPublicKey(b)
}

// OverlayPlaceholder stands, in a declaration to a node that made its own
// keys, where a template printed the node's private overlay key: the agent
// writes its own key in its place, which never leaves the machine.
const OverlayPlaceholder = "MESH-OVERLAY-PRIVATE-KEY-OF-THIS-NODE"

// NodeBeat is the MAC key of the liveness beats of a node that made its own
// keys, answered to it at enrolment (EnrolReply.Beat). Remembered with the
// node's other keys: liveness asks for it at every beat, 20,000 a second
// at 100,000 nodes, and deriving it afresh each time (an HMAC made and
// summed) was a third of what the controller allocated at rest, so the
// collector ran every three seconds (docs/performance.md, "Liveness").
// The answer is the keyring's own: read it, never write it.
func (k *Keyring) NodeBeat(node string) []byte {
	return lazily(k, node, func(n nodeKeys) []byte { return n.beat }, func(n *nodeKeys, v []byte) { n.beat = v }, func(k *Keyring, node string) []byte {
		return deriveRaw(k.seed, "beat\x00"+node)
	})
}
