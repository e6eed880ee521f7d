package declaration

import (
	"crypto/ed25519"
	"encoding/base64"
)

// Rule 20, both directions are proven: the controller signs what it tells a
// node (Seal), and the node's agent signs what it says back (Sign, with its
// report key). A message's signature covers exactly its data, the bytes the
// stream stores, and travels in two headers (events.SignerHeader,
// events.SignatureHeader), so a report is its own proof wherever it is
// read: the log, a backup; audit checks it.

// Sign answers the signature header's value for data: a message's
// signature, by the same key and the same ed25519 as Seal.
func (s *Signer) Sign(data []byte) string {
	return base64.StdEncoding.EncodeToString(ed25519.Sign(s.priv, data))
}
