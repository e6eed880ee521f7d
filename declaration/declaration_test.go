package declaration

import (
	"errors"
	"testing"
	"time"

	"github.com/meshctl/mesh/compose"
	"github.com/nats-io/nkeys"
)

func TestSealOpen(t *testing.T) {
	kp, _ := nkeys.CreateAccount()
	pub, _ := kp.PublicKey()
	content := "x = 1\n"
	d := Declaration{Mesh: "m", Node: "web-1", Sequence: 7, ComposedAt: time.Unix(1, 0), Previous: "abc",
		Resources: []compose.Resource{{Path: "/a", Kind: "file", Mode: "0644", Content: &content, Module: "app"}}}
	s, err := Seal(kp, d)
	if err != nil {
		t.Fatal(err)
	}
	// The signature is nkeys': what the nkeys API verifies.
	if err := kp.Verify(s.Bytes, s.Signature); err != nil {
		t.Fatalf("nkeys does not verify a Signer's signature: %v", err)
	}
	got, err := Open(s, pub, "m", "web-1")
	if err != nil || got.Sequence != 7 || got.Previous != "abc" || *got.Resources[0].Content != content {
		t.Fatalf("open: %+v %v", got, err)
	}
	other, _ := nkeys.CreateAccount()
	otherPub, _ := other.PublicKey()
	if _, err := Open(s, otherPub, "m", "web-1"); !errors.Is(err, ErrSignature) {
		t.Fatalf("another pinned key: %v", err)
	}
	if _, err := Open(s, pub, "m", "web-2"); !errors.Is(err, ErrNode) {
		t.Fatalf("another node: %v", err)
	}
	if _, err := Open(s, pub, "other", "web-1"); !errors.Is(err, ErrMesh) {
		t.Fatalf("another mesh: %v", err)
	}
	// Every byte the signature covers matters: the sequence, the chain, the content.
	for i := range s.Bytes {
		tampered := Sealed{Bytes: append([]byte(nil), s.Bytes...), Signature: s.Signature}
		tampered.Bytes[i] ^= 1
		if _, err := Open(tampered, pub, "m", "web-1"); !errors.Is(err, ErrSignature) {
			t.Fatalf("byte %d changed and it still opened: %v", i, err)
		}
	}
	// The content digest ignores the envelope; the digest does not.
	d2 := d
	d2.Sequence, d2.Previous, d2.ComposedAt = 8, "def", time.Unix(2, 0)
	s2, _ := Seal(kp, d2)
	if d.ContentDigest() != d2.ContentDigest() || s.Digest() == s2.Digest() {
		t.Fatal("content digest must ignore sequence, chain and time; the digest must not")
	}
}
