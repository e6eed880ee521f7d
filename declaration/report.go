package declaration

import (
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"fmt"

	"github.com/nats-io/nkeys"
)

// Rule 20, both directions are proven: the controller signs what it tells a
// node (Seal), and the node's agent signs what it says back. A message's
// signature covers exactly its data, the bytes the stream stores, and
// travels in two headers (events.SignerHeader, events.SignatureHeader), so a
// report is its own proof wherever it is read: the fold, audit, a backup.

// Refusals of VerifyMessage.
var (
	ErrUnsigned         = errors.New("it is not signed")
	ErrMessageSignature = errors.New("its signature does not verify against its signer")
)

// MessageSigner signs messages' data with one key.
type MessageSigner struct {
	priv ed25519.PrivateKey
	pub  string
}

// NewMessageSigner signs with kp (an nkey with a seed).
func NewMessageSigner(kp nkeys.KeyPair) (*MessageSigner, error) {
	seed, err := kp.Seed()
	if err != nil {
		return nil, fmt.Errorf("declaration: the key has no seed to sign with: %w", err)
	}
	_, raw, err := nkeys.DecodeSeed(seed)
	if err != nil {
		return nil, fmt.Errorf("declaration: the key's seed is not usable: %w", err)
	}
	pub, err := kp.PublicKey()
	if err != nil {
		return nil, err
	}
	return &MessageSigner{priv: ed25519.NewKeyFromSeed(raw), pub: pub}, nil
}

// PublicKey is the signer's public nkey, the value of the signer header.
func (s *MessageSigner) PublicKey() string { return s.pub }

// Sign answers the signature header's value for data.
func (s *MessageSigner) Sign(data []byte) string {
	return base64.StdEncoding.EncodeToString(ed25519.Sign(s.priv, data))
}

// VerifyMessage checks that sig (a signature header's value) is signer's
// signature of exactly data.
func VerifyMessage(signer string, data []byte, sig string) error {
	if signer == "" || sig == "" {
		return ErrUnsigned
	}
	pk, err := nkeys.FromPublicKey(signer)
	if err != nil {
		return fmt.Errorf("%w: the signer %q is not a public key", ErrMessageSignature, signer)
	}
	raw, err := base64.StdEncoding.DecodeString(sig)
	if err != nil {
		return fmt.Errorf("%w: the signature is not base64", ErrMessageSignature)
	}
	if pk.Verify(data, raw) != nil {
		return ErrMessageSignature
	}
	return nil
}
