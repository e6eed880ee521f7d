package declaration

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/meshctl/mesh/compose"
	"github.com/nats-io/nkeys"
)

// UnknownBuild marks the builds of a hand-written declaration: the mesh did
// not compose it, so it cannot say which build of anything it holds.
const UnknownBuild = "unknown"

// Declaration is the whole of what one node is told, envelope and content.
type Declaration struct {
	Mesh       string                `json:"mesh"`
	Node       string                `json:"node"`
	Sequence   uint64                `json:"sequence"`
	ComposedAt time.Time             `json:"composed_at"`
	Previous   string                `json:"previous"` // Digest of the declaration sent before, "" for the first
	Modules    []compose.ModuleBuild `json:"modules"`
	Resources  []compose.Resource    `json:"resources"`
	Receives   []compose.Receipt     `json:"receives"`
	Runs       []compose.Runtime     `json:"runs,omitempty"`
	// Network is the node's place on the overlay: omitted while the mesh
	// has none, so a declaration without one keeps its bytes.
	Network *compose.Network `json:"network,omitempty"`
}

// New puts the envelope (sequence, chain, time) around composed content.
func New(c compose.Declaration, seq uint64, previous string, at time.Time) Declaration {
	return Declaration{Mesh: c.Mesh, Node: c.Node, Sequence: seq, ComposedAt: at.UTC(), Previous: previous,
		Modules: c.Modules, Resources: c.Resources, Receives: c.Receives, Runs: c.Runs, Network: c.Network}
}

// Content is the declaration without its envelope: what compose produced.
func (d Declaration) Content() compose.Declaration {
	return compose.Declaration{Mesh: d.Mesh, Node: d.Node, Modules: nonNil(d.Modules), Resources: nonNil(d.Resources), Receives: nonNil(d.Receives), Runs: d.Runs, Network: d.Network}
}

// Canonical is the one byte form that is signed: fixed field order, no
// insignificant white space, no HTML escaping, empty lists as [].
func (d Declaration) Canonical() []byte {
	d.Modules, d.Resources, d.Receives = nonNil(d.Modules), nonNil(d.Resources), nonNil(d.Receives)
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(d) // strings, numbers, a time and slices of them: it always encodes
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// ContentDigest is the digest of the content alone (rule 4: "is it current?").
func (d Declaration) ContentDigest() string { return compose.Digest(d.Content().Canonical()) }

// Sealed is a declaration as it travels: the exact signed bytes, the
// signature over them (or over the root of the window they were signed
// in, which Proof leads to: window.go), and the public key of the signer.
type Sealed struct {
	Bytes     []byte `json:"declaration"`
	Signature []byte `json:"signature"`
	Key       string `json:"key"`
	Proof     []byte `json:"proof,omitempty"`
}

// Digest names this one send: the sha256 of exactly the signed bytes.
func (s Sealed) Digest() string { return compose.Digest(s.Bytes) }

// Signer signs declarations with the controller's key. It holds the
// expanded ed25519 private key: nkeys re-derives it from the seed on every
// Sign and PublicKey call, which was two thirds of a push's signing time.
// The signatures are the same bytes nkeys would make (nkeys is ed25519).
type Signer struct {
	priv ed25519.PrivateKey
	pub  string
}

// NewSigner prepares kp for signing many declarations.
func NewSigner(kp nkeys.KeyPair) (*Signer, error) {
	seed, err := kp.Seed()
	if err != nil {
		return nil, fmt.Errorf("declaration: the controller key has no seed: %w", err)
	}
	_, raw, err := nkeys.DecodeSeed(seed)
	if err != nil {
		return nil, fmt.Errorf("declaration: the controller key's seed is not usable: %w", err)
	}
	pub, err := kp.PublicKey()
	if err != nil {
		return nil, err
	}
	return &Signer{priv: ed25519.NewKeyFromSeed(raw), pub: pub}, nil
}

// PublicKey is the key agents pin.
func (s *Signer) PublicKey() string { return s.pub }

// Seal signs d's canonical bytes.
func (s *Signer) Seal(d Declaration) Sealed {
	b := d.Canonical()
	return Sealed{Bytes: b, Signature: ed25519.Sign(s.priv, b), Key: s.pub}
}

// Seal signs d's canonical bytes with kp (for one-off signing; a controller
// signing many uses a Signer).
func Seal(kp nkeys.KeyPair, d Declaration) (Sealed, error) {
	s, err := NewSigner(kp)
	if err != nil {
		return Sealed{}, err
	}
	return s.Seal(d), nil
}

// Refusals of Open. Each is wrapped with the detail a report carries.
var (
	ErrSignature = errors.New("the signature does not verify against the pinned controller key")
	ErrMesh      = errors.New("the declaration is for another mesh")
	ErrNode      = errors.New("the declaration is for another node")
	ErrMalformed = errors.New("the declaration is malformed")
)

// Open verifies s against the pinned controller key before reading anything
// in it, then checks it is for this mesh and this node. The key carried in s
// is ignored: trusting it would let anyone sign.
func Open(s Sealed, pinned, mesh, node string) (Declaration, error) {
	pk, err := nkeys.FromPublicKey(pinned)
	if err != nil {
		return Declaration{}, fmt.Errorf("declaration: the pinned key %q is not a public key: %w", pinned, err)
	}
	msg, err := SignedMessage(s.Bytes, s.Proof)
	if err != nil {
		return Declaration{}, err
	}
	if err := pk.Verify(msg, s.Signature); err != nil {
		return Declaration{}, ErrSignature
	}
	var d Declaration
	dec := json.NewDecoder(bytes.NewReader(s.Bytes))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&d); err != nil {
		return Declaration{}, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	switch {
	case d.Mesh != mesh:
		return d, fmt.Errorf("%w: it is for mesh %q, this node is in %q", ErrMesh, d.Mesh, mesh)
	case d.Node != node:
		return d, fmt.Errorf("%w: it is for %q, this node is %q", ErrNode, d.Node, node)
	}
	return d, nil
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// Head is the beginning of a declaration's bytes: who it is for, its place
// in the node's chain, and the builds it names. The fold checks a send's
// event against it (rule 19) and the history index keeps the builds.
type Head struct {
	Mesh     string
	Node     string
	Sequence uint64
	Previous string
	Modules  []compose.ModuleBuild
}

// ReadHead reads a declaration's head and no further: the resources after
// it are most of the bytes (decoding the whole declaration to get the
// builds doubled the cost of folding a send). The controller signs only
// Canonical bytes, where each field appears once; bytes that repeat a field
// were not signed by it, and audit says so.
func ReadHead(b []byte) (Head, error) {
	if h, ok := canonicalHead(b); ok {
		return h, nil
	}
	return decodedHead(b)
}

// Builds reads the module builds a declaration's bytes name (see ReadHead).
func Builds(b []byte) ([]compose.ModuleBuild, error) {
	h, err := ReadHead(b)
	return h.Modules, err
}

// decodedHead reads the head with encoding/json, up to "modules".
func decodedHead(b []byte) (Head, error) {
	var h Head
	dec := json.NewDecoder(bytes.NewReader(b))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return h, fmt.Errorf("%w: it is not a JSON object", ErrMalformed)
	}
	fields := map[string]any{"mesh": &h.Mesh, "node": &h.Node, "sequence": &h.Sequence, "previous": &h.Previous, "modules": &h.Modules}
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return h, fmt.Errorf("%w: %v", ErrMalformed, err)
		}
		var dst any = new(json.RawMessage)
		if f, ok := fields[key.(string)]; ok {
			dst = f
		}
		if err := dec.Decode(dst); err != nil {
			return h, fmt.Errorf("%w: %v", ErrMalformed, err)
		}
		if key == "modules" {
			break
		}
	}
	h.Modules = nonNil(h.Modules)
	return h, nil
}

// canonicalHead reads the head from bytes that begin exactly as Canonical
// writes them, strings without escapes, or answers false and ReadHead
// decodes them with encoding/json (a tenth of the cost: a JSON decoder's
// tokens were 15 µs a send).
func canonicalHead(b []byte) (Head, bool) {
	h := head{b: b}
	var out Head
	h.lit(`{"mesh":`)
	out.Mesh = h.str()
	h.lit(`,"node":`)
	out.Node = h.str()
	h.lit(`,"sequence":`)
	out.Sequence = h.digits()
	h.lit(`,"composed_at":`)
	h.raw()
	h.lit(`,"previous":`)
	out.Previous = h.str()
	h.lit(`,"modules":[`)
	out.Modules = []compose.ModuleBuild{}
	for !h.bad && !h.has("]") {
		if len(out.Modules) > 0 {
			h.lit(",")
		}
		h.lit(`{"module":`)
		m := h.str()
		h.lit(`,"build":`)
		out.Modules = append(out.Modules, compose.ModuleBuild{Module: m, Build: h.str()})
		h.lit("}")
	}
	return out, h.lit(`,"resources":`)
}

// head reads the literal beginning of canonical bytes; any surprise sets bad.
type head struct {
	b   []byte
	bad bool
}

// has consumes s if the bytes go on with it.
func (h *head) has(s string) bool {
	if h.bad || !bytes.HasPrefix(h.b, []byte(s)) {
		return false
	}
	h.b = h.b[len(s):]
	return true
}

// lit consumes s, which must come next.
func (h *head) lit(s string) bool {
	ok := h.has(s)
	h.bad = h.bad || !ok
	return ok
}

// str reads a quoted string of printable ASCII: what encoding/json would
// read the same without unescaping or rewriting anything.
func (h *head) str() string { return string(h.raw()) }

// raw is str's bytes, not made a string: the time, which the head reads
// past and keeps nothing of (a string made and dropped at every send the
// fold reads).
func (h *head) raw() []byte {
	if !h.lit(`"`) {
		return nil
	}
	for i, c := range h.b {
		switch {
		case c == '"':
			v := h.b[:i]
			h.b = h.b[i+1:]
			return v
		case c < 0x20 || c >= 0x7f || c == '\\':
			h.bad = true
			return nil
		}
	}
	h.bad = true
	return nil
}

// digits reads JSON's unsigned integer syntax (no leading zero) as a
// uint64; one that overflows is a surprise.
func (h *head) digits() uint64 {
	i := 0
	var v uint64
	for i < len(h.b) && h.b[i] >= '0' && h.b[i] <= '9' {
		d := uint64(h.b[i] - '0')
		if v > (math.MaxUint64-d)/10 {
			h.bad = true
		}
		v = v*10 + d
		i++
	}
	h.bad = h.bad || i == 0 || i > 1 && h.b[0] == '0'
	h.b = h.b[i:]
	return v
}
