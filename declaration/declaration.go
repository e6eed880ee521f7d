package declaration

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
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
}

// New puts the envelope (sequence, chain, time) around composed content.
func New(c compose.Declaration, seq uint64, previous string, at time.Time) Declaration {
	return Declaration{Mesh: c.Mesh, Node: c.Node, Sequence: seq, ComposedAt: at.UTC(), Previous: previous,
		Modules: c.Modules, Resources: c.Resources, Receives: c.Receives}
}

// Content is the declaration without its envelope: what compose produced.
func (d Declaration) Content() compose.Declaration {
	return compose.Declaration{Mesh: d.Mesh, Node: d.Node, Modules: nonNil(d.Modules), Resources: nonNil(d.Resources), Receives: nonNil(d.Receives)}
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
// signature over them, and the public key of the signer.
type Sealed struct {
	Bytes     []byte `json:"declaration"`
	Signature []byte `json:"signature"`
	Key       string `json:"key"`
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
	if err := pk.Verify(s.Bytes, s.Signature); err != nil {
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
