package declaration

import (
	"crypto/ecdh"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"sync"

	"github.com/nats-io/nkeys"
)

// The keys a mesh derives from its controller key, so that nothing per node
// has to be kept secret in the log or backed up: a controller restored with
// its key knows them all again. Each is an HMAC of a seed under a label, so
// one cannot be turned into another or back into the seed it came from.
//
//	controller seed ─┬─ "node\0NAME"  → the node's bus key (its join string)
//	                 │                   ├─ "report mac" → the node's MAC key
//	                 │                   ├─ "declaration seal" → the key of what is sealed to it
//	                 │                   └─ "overlay" → its overlay (WireGuard) curve key
//	                 ├─ "operator"    → the operator's bus key
//	                 ├─ "log mac"     → the controller's MAC key
//	                 ├─ "secret settings" → seals secret settings in the log (with a
//	                 │                      forgettable per-secret salt, see commands)
//	                 ├─ "content mac" → keyed digests of sealed content
//	                 ├─ "mint"        → the credentials the mesh mints
//	                 └─ "callout issuer", "controller user" → a closed cluster's keys
//
// A MAC (the MACHeader of a message) proves to the controller that the
// holder of a key wrote the message: the controller's for its events, a
// node's join string for its reports. It is cheap to check (a keyed
// sha256), so the fold checks every message. It proves nothing to a third
// party, since the controller can make any of them: that is what the
// signatures are for (Signer.Seal, Signer.Sign), which audit checks.

// deriveRaw is the HMAC of a raw seed under label.
func deriveRaw(seed []byte, label string) []byte {
	mac := hmac.New(sha256.New, seed)
	mac.Write([]byte("mesh bus identity\x00" + label))
	return mac.Sum(nil)
}

// rawSeed is the ed25519 seed of an nkey.
func rawSeed(kp nkeys.KeyPair) ([]byte, error) {
	seed, err := kp.Seed()
	if err != nil {
		return nil, fmt.Errorf("the key has no seed to derive from: %w", err)
	}
	_, raw, err := nkeys.DecodeSeed(seed)
	return raw, err
}

// DeriveKey is the key labelled label derived from kp, as an nkey of prefix.
func DeriveKey(kp nkeys.KeyPair, label string, prefix nkeys.PrefixByte) (nkeys.KeyPair, error) {
	raw, err := rawSeed(kp)
	if err != nil {
		return nil, err
	}
	return nkeys.FromRawSeed(prefix, deriveRaw(raw, label))
}

// ModuleKey is the bus identity of a module running on a node, derived
// from the node's bus key (the seed in its join string): its agent and the
// controller both compute it, so no new secret travels (issue 15).
func ModuleKey(bus nkeys.KeyPair, module string) (nkeys.KeyPair, error) {
	return DeriveKey(bus, "module\x00"+module, nkeys.PrefixByteUser)
}

// Module is the public key of module's identity on node, and the MAC key
// of the standings it reports: what the fold checks them against.
func (k *Keyring) Module(node, module string) (string, []byte) {
	raw := deriveRaw(deriveRaw(k.seed, NodeLabel(node)), "module\x00"+module)
	kp, err := nkeys.FromRawSeed(nkeys.PrefixByteUser, raw)
	if err != nil {
		return "", nil
	}
	pub, _ := kp.PublicKey()
	return pub, deriveRaw(raw, "report mac")
}

// NodeLabel is the label of a node's bus key.
func NodeLabel(node string) string { return "node\x00" + node }

// ReportMACKey is the MAC key of a node's reports, from the node's bus key
// (the seed in its join string): the agent computes it from what it holds.
func ReportMACKey(bus nkeys.KeyPair) ([]byte, error) {
	raw, err := rawSeed(bus)
	if err != nil {
		return nil, err
	}
	return deriveRaw(raw, "report mac"), nil
}

// SealKey is the key of what is sealed to a node (the rendered files of a
// declaration that hold a secret), from the node's bus key: the agent
// computes it from its join string, the controller from its own key, and
// nobody else can.
func SealKey(bus nkeys.KeyPair) ([]byte, error) {
	raw, err := rawSeed(bus)
	if err != nil {
		return nil, err
	}
	return deriveRaw(raw, sealLabel), nil
}

const sealLabel = "declaration seal"

// MAC is the MACHeader value of a message with subject and data under key.
// The subject is inside it, so a message cannot be moved to another.
func MAC(key []byte, subject string, data []byte) string {
	return macWith(hmac.New(sha256.New, key), subject, data)
}

func macWith(h hash.Hash, subject string, data []byte) string {
	io.WriteString(h, subject)
	h.Write([]byte{0})
	h.Write(data)
	var sum [sha256.Size]byte
	return base64.StdEncoding.EncodeToString(h.Sum(sum[:0]))
}

// MACs makes the MACs of many messages under one key (the controller's
// appends), keeping keyed hashes to reset rather than make again: making
// one hashes the key's two pads and allocates the hash's states, which a
// push paid for every one of its ten thousand appends. Safe for concurrent
// use; MAC(key, ...) is the same value.
type MACs struct {
	key  []byte
	pool sync.Pool
}

// NewMACs makes MACs under key.
func NewMACs(key []byte) *MACs { return &MACs{key: key} }

// Key is the key m makes MACs under.
func (m *MACs) Key() []byte { return m.key }

// MAC is MAC(m.Key(), subject, data).
func (m *MACs) MAC(subject string, data []byte) string {
	h, _ := m.pool.Get().(hash.Hash)
	if h == nil {
		h = hmac.New(sha256.New, m.key)
	} else {
		h.Reset()
	}
	defer m.pool.Put(h)
	return macWith(h, subject, data)
}

// CheckMAC reports whether got is the MAC of subject and data under key.
func CheckMAC(key []byte, subject string, data []byte, got string) bool {
	var c MACChecker
	return c.Check(key, subject, data, got)
}

// MACChecker checks MACs, keeping keyed hashes to reset rather than make
// again (making one was a third of checking a report). It keeps at most
// maxCheckerKeys: a keyed hash holds about 650 bytes, and one per node in
// each of the fold's decoding workers held 129 MB of a controller's heap at
// 100,000 nodes. A key past the bound gets a keyed hash made for that
// check alone (crypto/hmac, not HMAC written again here) and the kept ones
// stay: it once started over past the bound instead, so in a fleet larger
// than it nearly every report also grew the map again from empty, 2% of
// the controller's CPU a pushed node at 10,000 nodes (issue 34). One per
// goroutine: it is not safe for concurrent use.
type MACChecker struct {
	hashes map[string]hash.Hash
	sum    []byte
	want   [sha256.Size + 2]byte
	// text holds the MAC's text and then the subject and its 0 while they
	// are hashed: converted afresh, they were three allocations an event.
	text []byte
}

// Check reports whether got is the MAC of subject and data under key.
func (c *MACChecker) Check(key []byte, subject string, data []byte, got string) bool {
	if got == "" || base64.StdEncoding.DecodedLen(len(got)) > len(c.want) {
		return false
	}
	c.text = append(c.text[:0], got...)
	return c.check(key, subject, data, c.text)
}

// check is Check with the MAC's text as bytes (a beat's, cut from its
// payload, which a string would copy at every beat); it may overwrite text
// when text is c.text.
func (c *MACChecker) check(key []byte, subject string, data, text []byte) bool {
	if len(text) == 0 || key == nil || base64.StdEncoding.DecodedLen(len(text)) > len(c.want) {
		return false
	}
	n, err := base64.StdEncoding.Decode(c.want[:], text)
	if err != nil || n != sha256.Size {
		return false
	}
	if c.hashes == nil {
		c.hashes = map[string]hash.Hash{}
	}
	c.text = append(append(c.text[:0], subject...), 0)
	h, ok := c.hashes[string(key)]
	switch {
	case ok:
		h.Reset()
	default:
		h = hmac.New(sha256.New, key)
		if len(c.hashes) < maxCheckerKeys {
			c.hashes[string(key)] = h
		}
	}
	h.Write(c.text)
	h.Write(data)
	c.sum = h.Sum(c.sum[:0])
	return hmac.Equal(c.sum, c.want[:n])
}

// Keyring answers the keys derived from one controller key, remembering a
// node's once derived: the fold asks for them at every report.
type Keyring struct {
	seed       []byte
	controller string
	logMAC     []byte
	settings   []byte
	contentMAC []byte
	mint       []byte

	mu    sync.Mutex
	nodes map[string]nodeKeys
}

type nodeKeys struct {
	mac     []byte
	beat    []byte // the beat MAC key of a node that made its own keys, once asked for
	bus     string // public, once asked for
	overlay string // public overlay key, once asked for
}

// NewKeyring derives from the controller key kp.
func NewKeyring(kp nkeys.KeyPair) (*Keyring, error) {
	raw, err := rawSeed(kp)
	if err != nil {
		return nil, err
	}
	pub, err := kp.PublicKey()
	if err != nil {
		return nil, err
	}
	return &Keyring{seed: raw, controller: pub, logMAC: deriveRaw(raw, "log mac"), settings: deriveRaw(raw, "secret settings"),
		contentMAC: deriveRaw(raw, "content mac"), mint: deriveRaw(raw, "mint"), nodes: map[string]nodeKeys{}}, nil
}

// Controller is the controller's public key.
func (k *Keyring) Controller() string { return k.controller }

// LogMAC is the MAC key of the controller's own messages.
func (k *Keyring) LogMAC() []byte { return k.logMAC }

// Settings is the key secret settings are sealed under in the log (with
// each secret's salt).
func (k *Keyring) Settings() []byte { return k.settings }

// ContentMAC keys the digests of sealed content: "it changed" without a
// digest anyone else can compute to test a guess.
func (k *Keyring) ContentMAC() []byte { return k.contentMAC }

// Mint is the key credentials are minted from.
func (k *Keyring) Mint() []byte { return k.mint }

// NodeSeal is the key of what is sealed to node (see SealKey). Derived
// afresh (two HMACs, a microsecond or two), not through the remembered
// node keys: those also make the node's public key, which, under the
// keyring's lock, made the first push after a start to 10,000 nodes with
// a secret each half a second slower than one without.
func (k *Keyring) NodeSeal(node string) []byte {
	return deriveRaw(deriveRaw(k.seed, NodeLabel(node)), sealLabel)
}

// NodeMAC is the MAC key of node's reports.
func (k *Keyring) NodeMAC(node string) []byte { return k.node(node).mac }

// NodeBus is node's public bus key: the key in its join string. Derived on
// first asking, not with the MAC key: a public key costs a scalar
// multiplication (about 20 µs), and the fold asks for every node's MAC key
// but only rarely for a bus key (a report signed with it).
func (k *Keyring) NodeBus(node string) string {
	return lazily(k, node, func(n nodeKeys) string { return n.bus }, func(n *nodeKeys, v string) { n.bus = v }, func(k *Keyring, node string) string {
		kp, err := nkeys.FromRawSeed(nkeys.PrefixByteUser, deriveRaw(k.seed, NodeLabel(node)))
		if err != nil {
			return ""
		}
		pub, _ := kp.PublicKey()
		return pub
	})
}

// lazily is the key of node that get reads, derived once by derive and
// then remembered with the node's other keys (set). derive is given k and
// node rather than closing over them, and get takes the node's keys by
// value: a closure made at each call, or the keys moved to the heap to be
// pointed into, is an allocation, and liveness asks for a beat key at
// every beat.
func lazily[K ~string | ~[]byte](k *Keyring, node string, get func(nodeKeys) K, set func(*nodeKeys, K), derive func(k *Keyring, node string) K) K {
	if v := get(k.node(node)); len(v) != 0 {
		return v
	}
	v := derive(k, node)
	k.mu.Lock()
	defer k.mu.Unlock()
	if have, ok := k.nodes[node]; ok {
		set(&have, v)
		k.nodes[node] = have
	}
	return v
}

// overlayLabel derives a node's overlay key from its bus key.
const overlayLabel = "overlay"

// OverlayKey is the overlay (X25519, WireGuard's) key pair derived from a
// node's bus key, both base64 as WireGuard writes them. The node's agent
// derives it from its join string, the controller from its own key: no new
// secret travels.
func OverlayKey(bus nkeys.KeyPair) (private, public string, err error) {
	raw, err := rawSeed(bus)
	if err != nil {
		return "", "", err
	}
	return overlayOf(raw)
}

func overlayOf(busRaw []byte) (private, public string, err error) {
	k, err := ecdh.X25519().NewPrivateKey(deriveRaw(busRaw, overlayLabel))
	if err != nil {
		return "", "", err
	}
	return base64.StdEncoding.EncodeToString(k.Bytes()), base64.StdEncoding.EncodeToString(k.PublicKey().Bytes()), nil
}

// NodeOverlay is node's overlay key pair (see OverlayKey).
func (k *Keyring) NodeOverlay(node string) (private, public string) {
	private, public, _ = overlayOf(deriveRaw(k.seed, NodeLabel(node)))
	return private, public
}

// NodeOverlayPublic is node's public overlay key, remembered: every
// composition of a mesh with a network reads every node's.
func (k *Keyring) NodeOverlayPublic(node string) string {
	return lazily(k, node, func(n nodeKeys) string { return n.overlay }, func(n *nodeKeys, v string) { n.overlay = v }, func(k *Keyring, node string) string {
		_, public := k.NodeOverlay(node)
		return public
	})
}

// maxRemembered bounds what a keyring remembers: past it, it forgets all
// and derives again (a few microseconds a node), rather than grow with
// every name a stray writer makes up.
const maxRemembered = 1 << 17

// maxCheckerKeys bounds the keyed hashes a MACChecker keeps (see there).
const maxCheckerKeys = 4096

func (k *Keyring) node(node string) nodeKeys {
	k.mu.Lock()
	defer k.mu.Unlock()
	if n, ok := k.nodes[node]; ok {
		return n
	}
	bus := deriveRaw(k.seed, NodeLabel(node))
	n := nodeKeys{mac: deriveRaw(bus, "report mac")}
	if len(k.nodes) >= maxRemembered {
		clear(k.nodes)
	}
	k.nodes[node] = n
	return n
}

// WriteNewKey writes kp's seed to path, mode 0600, in a directory made
// 0700 if need be, and syncs it: a key a node pinned or a report was
// signed with must survive a crash. O_EXCL: it never overwrites a key, even
// one that appeared since the caller looked (fs.ErrExist says so).
func WriteNewKey(path string, kp nkeys.KeyPair) error {
	seed, err := kp.Seed()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(seed); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
