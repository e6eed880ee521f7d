package declaration

import (
	"strings"
	"testing"
	"time"

	"github.com/meshctl/mesh/compose"
	"github.com/nats-io/nkeys"
)

// BenchmarkSealParts is what a push does per node after composing, on a
// declaration of about 1,200 bytes (a module's file and directory): Seal
// (the canonical bytes, an ed25519 signature) and ContentDigest (the
// content encoded and hashed again), interleaved in rounds so the
// machine's noise falls on both alike. Push takes the content digest from
// composition now (issue 34); content/seal is what that saved, as a share
// of sealing. ns/op and allocs/op are the two together.
func BenchmarkSealParts(b *testing.B) {
	kp, _ := nkeys.CreateAccount()
	s, err := NewSigner(kp)
	if err != nil {
		b.Fatal(err)
	}
	d := New(benchComposed(), 7, strings.Repeat("c", 64), time.Now())
	if n := len(d.Canonical()); n < 1100 || n > 1400 {
		b.Fatalf("the declaration is %d bytes, not about 1,200", n)
	}
	var seal, content time.Duration
	const round = 100
	b.ReportAllocs()
	for done := 0; done < b.N; done += round {
		n := min(round, b.N-done)
		t0 := time.Now()
		for range n {
			s.Seal(d)
		}
		t1 := time.Now()
		for range n {
			d.ContentDigest()
		}
		seal, content = seal+t1.Sub(t0), content+time.Since(t1)
	}
	b.ReportMetric(float64(seal.Nanoseconds())/float64(b.N), "seal-ns/op")
	b.ReportMetric(float64(content.Nanoseconds())/float64(b.N), "content-digest-ns/op")
	b.ReportMetric(content.Seconds()/seal.Seconds(), "content/seal")
}

// BenchmarkSealWindow is a push's signing of WindowSize declarations of
// about 1,200 bytes: each sealed alone (a signature each) against the
// window sealed together (a salted hash each, one signature), interleaved
// in rounds so the machine's noise falls on both alike. window/alone is
// the share of signing's CPU a window keeps; proof-bytes what each send
// carries more on the bus. ns/op is one declaration both ways.
func BenchmarkSealWindow(b *testing.B) {
	kp, _ := nkeys.CreateAccount()
	s, err := NewSigner(kp)
	if err != nil {
		b.Fatal(err)
	}
	motd := strings.Repeat("welcome to the mesh, be kind to the machines\n", 17)
	ds := make([]Declaration, WindowSize)
	for i := range ds {
		ds[i] = New(compose.Declaration{Mesh: "m", Node: "bench-00042", Receives: []compose.Receipt{},
			Modules:   []compose.ModuleBuild{{Module: "motd", Build: strings.Repeat("a", 64)}},
			Resources: []compose.Resource{{Path: "/etc/motd", Kind: "file", Mode: "0644", Content: &motd, Module: "motd"}}},
			uint64(i), strings.Repeat("c", 64), time.Now())
	}
	var alone, together time.Duration
	proof := 0
	for done := 0; done < b.N; done += WindowSize {
		t0 := time.Now()
		for _, d := range ds {
			s.Seal(d)
		}
		t1 := time.Now()
		w := s.SealMany(ds)
		alone, together = alone+t1.Sub(t0), together+time.Since(t1)
		proof = len(w[0].Proof)
	}
	b.ReportMetric(float64(alone.Nanoseconds())/float64(b.N), "alone-ns/decl")
	b.ReportMetric(float64(together.Nanoseconds())/float64(b.N), "window-ns/decl")
	b.ReportMetric(together.Seconds()/alone.Seconds(), "window/alone")
	b.ReportMetric(float64(proof), "proof-bytes")
}

// benchComposed is what the benchmarks seal: the motd module's
// composition for one node, about 1,200 bytes once declared, as a push of
// the bench's module sends.
func benchComposed() compose.Declaration {
	motd := strings.Repeat("welcome to the mesh, be kind to the machines\n", 17)
	return compose.Declaration{Mesh: "m", Node: "bench-00042", Receives: []compose.Receipt{},
		Modules:   []compose.ModuleBuild{{Module: "motd", Build: strings.Repeat("a", 64)}},
		Resources: []compose.Resource{{Path: "/etc/motd", Kind: "file", Mode: "0644", Content: &motd, Module: "motd"}, {Path: "/etc/motd.d", Kind: "directory", Mode: "0755", Module: "motd"}}}
}
