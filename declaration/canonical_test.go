package declaration

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/meshctl/mesh/compose"
)

// CanonicalFrom signs the bytes Canonical makes, for every shape of
// content a push composes (files, runs, a network, secrets sealed with a
// box and without, empty lists) and every envelope (a first send, a chain,
// a time at the edge of what JSON carries): an agent verifies these bytes,
// and audit and history digest Canonical's. Fails when the splice differs
// from encoding the declaration whole in any one of them.
func TestCanonicalFromIsCanonical(t *testing.T) {
	motd := strings.Repeat("welcome <to> the \"mesh\" \\ é\u2028\n", 9)
	files := []compose.Resource{{Path: "/etc/motd", Kind: "file", Mode: "0644", Content: &motd, Module: "motd"}, {Path: "/etc/motd.d", Kind: "directory", Mode: "0755", Module: "motd"}}
	sealed := []compose.Resource{{Path: "/etc/s", Kind: "file", Mode: "0600", Module: "db", Sealed: &compose.Sealed{MAC: "m", Box: "box", Keys: []string{"k"}}}}
	macOnly := []compose.Resource{{Path: "/etc/s", Kind: "file", Mode: "0600", Module: "db", Sealed: &compose.Sealed{MAC: "m"}}}
	mods := []compose.ModuleBuild{{Module: "motd", Build: strings.Repeat("a", 64)}}
	recv := []compose.Receipt{{Consumer: "app", Requirement: "db", Node: "n-2", Module: "postgres"}}
	contents := map[string]compose.Declaration{
		"files":        {Mesh: "m", Node: "bench-1", Modules: mods, Resources: files, Receives: []compose.Receipt{}},
		"empty lists":  {Mesh: "m", Node: "n", Modules: []compose.ModuleBuild{}, Resources: []compose.Resource{}, Receives: []compose.Receipt{}},
		"nil lists":    {Mesh: "m", Node: "n"},
		"sealed box":   {Mesh: "m", Node: "n", Modules: mods, Resources: sealed, Receives: recv},
		"sealed mac":   {Mesh: "m", Node: "n", Modules: mods, Resources: macOnly, Receives: recv},
		"runs network": {Mesh: "prod-eu", Node: "web-1", Modules: mods, Resources: files, Receives: recv, Runs: []compose.Runtime{{Module: "motd", Command: "/bin/true", Args: []string{"<a>"}, Env: map[string]string{"B": "1", "A": "2"}}}, Network: &compose.Network{Range: "10.0.0.0/24", Address: "10.0.0.1", Key: "k", Peers: []compose.Peer{{Node: "o", Address: "10.0.0.2", Key: "l"}}}},
		"escaped name": {Mesh: "m\"x", Node: "n<1>", Modules: mods, Resources: files, Receives: recv},
		"unicode name": {Mesh: "mé", Node: "n", Modules: mods, Resources: files, Receives: recv},
	}
	envelopes := []struct {
		seq      uint64
		previous string
		at       time.Time
	}{
		{1, "", time.Unix(1, 0)},
		{18446744073709551615, strings.Repeat("c", 64), time.Date(2026, 12, 5, 9, 10, 11, 123456789, time.UTC)},
		{7, "a\"b\\c\n", time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)},
		{7, "p", time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}, // JSON cannot carry it: both must fail alike
		{0, "p", time.Date(2026, 1, 1, 0, 0, 0, 0, time.FixedZone("x", 3600))},
	}
	for name, c := range contents {
		content := c.Canonical() // what compose.Result.Bytes holds
		for _, e := range envelopes {
			d := New(c, e.seq, e.previous, e.at)
			d.ComposedAt = e.at // New makes it UTC; a caller need not
			if got, want := d.CanonicalFrom(content), d.Canonical(); !bytes.Equal(got, want) {
				t.Fatalf("%s, sequence %d previous %q at %v:\nspliced %s\nwhole   %s", name, e.seq, e.previous, e.at, got, want)
			}
		}
	}
}

// Content that is not of this mesh and node is not spliced: the bytes are
// the declaration's own. Fails when a prefix of another node's content
// passes for this one's.
func TestCanonicalFromRefusesAnotherNodesContent(t *testing.T) {
	mods := []compose.ModuleBuild{{Module: "motd", Build: "b"}}
	c := compose.Declaration{Mesh: "m", Node: "web-1", Modules: mods, Resources: []compose.Resource{}, Receives: []compose.Receipt{}}
	d := New(c, 2, "p", time.Unix(3, 0))
	for _, other := range []compose.Declaration{
		{Mesh: "m", Node: "web-10", Modules: mods, Resources: []compose.Resource{}, Receives: []compose.Receipt{}},
		{Mesh: "n", Node: "web-1", Modules: mods, Resources: []compose.Resource{}, Receives: []compose.Receipt{}},
	} {
		if got := d.CanonicalFrom(other.Canonical()); !bytes.Equal(got, d.Canonical()) {
			t.Fatalf("spliced from %s/%s's content: %s", other.Mesh, other.Node, got)
		}
	}
	if got := d.CanonicalFrom(nil); !bytes.Equal(got, d.Canonical()) {
		t.Fatalf("spliced from no content: %s", got)
	}
}

// BenchmarkCanonicalFrom is a push's canonical bytes of a declaration of
// about 1,200 bytes: encoded whole (Canonical) against spliced from the
// content compose encoded already (CanonicalFrom), interleaved in rounds
// so the machine's noise falls on both alike. from/whole is the share of
// the encoding a push keeps.
func BenchmarkCanonicalFrom(b *testing.B) {
	c := benchComposed()
	d, content := New(c, 7, strings.Repeat("c", 64), time.Now()), c.Canonical()
	if n := len(d.Canonical()); n < 1100 || n > 1400 || !bytes.Equal(d.CanonicalFrom(content), d.Canonical()) {
		b.Fatalf("the declaration is %d bytes, not about 1,200, or the splice differs", n)
	}
	var whole, from time.Duration
	const round = 100
	b.ReportAllocs()
	for done := 0; done < b.N; done += round {
		n := min(round, b.N-done)
		t0 := time.Now()
		for range n {
			d.Canonical()
		}
		t1 := time.Now()
		for range n {
			d.CanonicalFrom(content)
		}
		whole, from = whole+t1.Sub(t0), from+time.Since(t1)
	}
	b.ReportMetric(float64(whole.Nanoseconds())/float64(b.N), "whole-ns/op")
	b.ReportMetric(float64(from.Nanoseconds())/float64(b.N), "from-ns/op")
	b.ReportMetric(from.Seconds()/whole.Seconds(), "from/whole")
}
