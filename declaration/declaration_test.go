package declaration

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

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

// ReadHead answers what decoding the whole declaration answers, for what the
// controller signs, and refuses what is not a declaration.
func TestBuildsReadsTheModulesOfTheSignedBytes(t *testing.T) {
	content := strings.Repeat("line\n", 50)
	for _, mods := range [][]compose.ModuleBuild{nil, {{Module: "app", Build: "b1"}, {Module: "db", Build: UnknownBuild}}} {
		d := New(compose.Declaration{Mesh: "m", Node: "web-1", Modules: mods,
			Resources: []compose.Resource{{Path: "/a", Kind: "file", Mode: "0644", Content: &content, Module: "app"}}}, 3, "prev", time.Unix(5, 0))
		b := d.Canonical()
		got, err := ReadHead(b)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := canonicalHead(b); !ok {
			t.Errorf("the canonical reading refused what Canonical wrote: %s", b)
		}
		var whole Declaration
		if err := json.Unmarshal(b, &whole); err != nil {
			t.Fatal(err)
		}
		want := Head{Mesh: whole.Mesh, Node: whole.Node, Sequence: whole.Sequence, Previous: whole.Previous, Modules: nonNil(whole.Modules)}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("builds of %s (-whole +head):\n%s", b, diff)
		}
	}
	for _, bad := range []string{``, `[]`, `{"modules":[{"module":1}]}`, `{"mesh":"m","modules":[{"module":"a"`} {
		if got, err := Builds([]byte(bad)); !errors.Is(err, ErrMalformed) {
			t.Errorf("Builds(%q) = %v, %v; want ErrMalformed", bad, got, err)
		}
	}
}

// FuzzBuilds: whatever the canonical reading accepts, encoding/json reads
// the same head from. (go test -fuzz FuzzBuilds ./declaration/ searches.)
func FuzzBuilds(f *testing.F) {
	content := "a"
	d := New(compose.Declaration{Mesh: "m", Node: "n", Modules: []compose.ModuleBuild{{Module: "a", Build: "b"}, {Module: "c", Build: "d"}},
		Resources: []compose.Resource{{Path: "/a", Kind: "file", Mode: "0644", Content: &content, Module: "a"}}}, 1, "p", time.Unix(0, 0))
	f.Add(d.Canonical())
	f.Add([]byte(`{"mesh":"m","node":"n","sequence":01,"composed_at":"t","previous":"","modules":[],"resources":[]}`))
	f.Add([]byte(`{"mesh":"m","node":"n","sequence":1,"composed_at":"t","previous":"","modules":[{"module":"\u0041","build":"b"}],"resources":[]}`))
	f.Add([]byte(`{"mesh":"m","node":"n","sequence":18446744073709551616,"composed_at":"t","previous":"","modules":[],"resources":[]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		fast, ok := canonicalHead(b)
		if !ok {
			return
		}
		slow, err := decodedHead(b)
		if err != nil {
			return // the bytes after the builds are not JSON; a reader of the whole refuses them
		}
		if diff := cmp.Diff(slow, fast); diff != "" {
			t.Fatalf("%q (-encoding/json +canonical):\n%s", b, diff)
		}
	})
}

// BenchmarkBuilds: reading the builds from the head of a declaration, as the
// history index does for every send, beside decoding it whole (ratio head/whole).
func BenchmarkBuilds(b *testing.B) {
	content := strings.Repeat("some configuration line\n", 40)
	var res []compose.Resource
	for i := range 8 {
		res = append(res, compose.Resource{Path: fmt.Sprintf("/etc/app/%d.conf", i), Kind: "file", Mode: "0644", Content: &content, Module: "app"})
	}
	d := New(compose.Declaration{Mesh: "m", Node: "web-1", Resources: res,
		Modules: []compose.ModuleBuild{{Module: "app", Build: strings.Repeat("a", 64)}, {Module: "db", Build: strings.Repeat("b", 64)}}}, 3, strings.Repeat("c", 71), time.Now())
	raw := d.Canonical()
	measure := func(fn func()) float64 {
		start := time.Now()
		for range b.N {
			fn()
		}
		return float64(time.Since(start).Nanoseconds()) / float64(b.N)
	}
	b.ResetTimer()
	head := measure(func() {
		if _, err := Builds(raw); err != nil {
			b.Fatal(err)
		}
	})
	whole := measure(func() {
		var d Declaration
		if err := json.Unmarshal(raw, &d); err != nil {
			b.Fatal(err)
		}
	})
	b.ReportMetric(head, "ns/head")
	b.ReportMetric(whole, "ns/whole")
	b.ReportMetric(head/whole, "head/whole")
}

// Every field of composed content survives the envelope: a field added to
// compose.Declaration and not to Declaration would be composed, never
// sent, and the node would be behind for ever (the overlay's Network was,
// once). Fails when New or Content drops one.
func TestTheEnvelopeKeepsEveryFieldOfTheContent(t *testing.T) {
	content := "x"
	c := compose.Declaration{Mesh: "m", Node: "n",
		Modules:   []compose.ModuleBuild{{Module: "a", Build: "b"}},
		Resources: []compose.Resource{{Path: "/p", Kind: "file", Mode: "0644", Content: &content, Module: "a"}},
		Receives:  []compose.Receipt{{Consumer: "a", Requirement: "r", Node: "o", Module: "p"}},
		Runs:      []compose.Runtime{{Module: "a", Command: "/bin/true"}},
		Network:   &compose.Network{Range: "10.0.0.0/24", Address: "10.0.0.1", Key: "k", Peers: []compose.Peer{{Node: "o", Address: "10.0.0.2", Key: "l"}}},
	}
	v := reflect.ValueOf(c)
	for i := range v.NumField() {
		if v.Field(i).IsZero() {
			t.Fatalf("the sample leaves compose.Declaration.%s empty: give it a value", v.Type().Field(i).Name)
		}
	}
	if diff := cmp.Diff(c, New(c, 1, "", time.Now()).Content()); diff != "" {
		t.Fatalf("content through the envelope (-composed +sent):\n%s", diff)
	}
}
