package declaration

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/meshctl/mesh/compose"
	"github.com/nats-io/nkeys"
)

// window makes n declarations for nodes web-0..web-(n-1), as one push's.
func window(n int) []Declaration {
	content := strings.Repeat("welcome\n", 20)
	ds := make([]Declaration, n)
	for i := range ds {
		ds[i] = New(compose.Declaration{Mesh: "m", Node: fmt.Sprintf("web-%d", i),
			Resources: []compose.Resource{{Path: "/etc/motd", Kind: "file", Mode: "0644", Content: &content, Module: "motd"}}},
			3, "", time.Unix(1, 0))
	}
	return ds
}

func windowSigner(t *testing.T) (*Signer, string) {
	t.Helper()
	kp, _ := nkeys.CreateAccount()
	s, err := NewSigner(kp)
	if err != nil {
		t.Fatal(err)
	}
	return s, s.PublicKey()
}

// Every declaration of a window opens alone, by its node, with the pinned
// key, whatever the window's size (powers of two and not, where RFC 9162's
// tree is lopsided), and the window shares one signature. Fails when a
// path is built or walked wrong for any place in any size.
func TestEveryDeclarationOfAWindowOpensAlone(t *testing.T) {
	s, pub := windowSigner(t)
	for n := 1; n <= 2*WindowSize+3; n++ {
		ds := window(n)
		sealed := s.SealMany(ds)
		for i, sd := range sealed {
			got, err := Open(sd, pub, "m", ds[i].Node)
			if err != nil || got.Node != ds[i].Node {
				t.Fatalf("window of %d, place %d: %+v, %v", n, i, got.Node, err)
			}
			if n > 1 && (len(sd.Proof) == 0 || !bytes.Equal(sd.Signature, sealed[0].Signature)) {
				t.Fatalf("window of %d, place %d: no proof, or a signature of its own", n, i)
			}
		}
		if n == 1 && len(sealed[0].Proof) != 0 {
			t.Fatalf("a window of one carries a proof: it is sealed alone, as Seal seals")
		}
	}
}

// Nothing but what was signed opens: a changed byte of a declaration, of
// its proof (salt, place, size or a hash), another declaration's proof, a
// proof cut short or dropped, each is refused. Dropping the proof must
// fail too: the window's signature covers its root, never a declaration's
// bytes. Fails when any part of the proof goes unchecked.
func TestAWindowOpensNothingButWhatWasSigned(t *testing.T) {
	s, pub := windowSigner(t)
	ds := window(11)
	sealed := s.SealMany(ds)
	refused := func(what string, sd Sealed) {
		t.Helper()
		_, err := Open(sd, pub, "m", "web-5")
		if !errors.Is(err, ErrSignature) && !errors.Is(err, ErrProof) {
			t.Fatalf("%s: opened (%v)", what, err)
		}
	}
	five := sealed[5]
	for i := range five.Bytes {
		sd := five
		sd.Bytes = bytes.Clone(five.Bytes)
		sd.Bytes[i] ^= 1
		refused(fmt.Sprintf("declaration byte %d changed", i), sd)
	}
	for i := range five.Proof {
		sd := five
		sd.Proof = bytes.Clone(five.Proof)
		sd.Proof[i] ^= 1
		refused(fmt.Sprintf("proof byte %d changed", i), sd)
	}
	for _, other := range []int{4, 6} {
		sd := five
		sd.Proof = sealed[other].Proof
		refused(fmt.Sprintf("the proof of place %d", other), sd)
	}
	for _, cut := range []int{1, 8, len(five.Proof) - 1} {
		sd := five
		sd.Proof = five.Proof[:cut]
		refused(fmt.Sprintf("the proof cut to %d bytes", cut), sd)
	}
	sd := five
	sd.Proof = nil
	refused("the proof dropped", sd)
	// Another place or size with the same hashes: the walk takes other
	// turns, so the root differs.
	for _, ps := range [][2]uint64{{4, 11}, {5, 12}, {5, 10}, {11, 11}} {
		sd := five
		p := append([]byte(nil), five.Proof[:saltSize]...)
		p = binary.AppendUvarint(p, ps[0])
		p = binary.AppendUvarint(p, ps[1])
		sd.Proof = append(p, five.Proof[saltSize+2:]...)
		refused(fmt.Sprintf("place %d of %d", ps[0], ps[1]), sd)
	}
	if _, err := Open(five, pub, "m", "web-5"); err != nil {
		t.Fatalf("the untouched send: %v", err)
	}
}

// A node sees the hashes beside its path, never another's bytes, and the
// salts make those hashes unguessable: two windows of the same
// declarations give different proofs. Fails when leaves are not salted.
func TestAWindowsHashesAreSalted(t *testing.T) {
	s, _ := windowSigner(t)
	ds := window(4)
	a, b := s.SealMany(ds), s.SealMany(ds)
	if bytes.Equal(a[0].Proof[saltSize+2:], b[0].Proof[saltSize+2:]) {
		t.Fatal("the same declarations sealed twice show the same sibling hashes: a node could test a guess at another's declaration")
	}
}
