package rows

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// arenaRows are n node rows unlike each other: digests in hex (kept as
// bytes) and not, a send or report or neither, failures, names of every
// length up to a few hundred bytes.
func arenaRows(n int) [][]byte {
	at := time.Unix(1_700_000_000, 0).UTC()
	out := make([][]byte, n)
	for i := range out {
		node := fullNode(at.Add(time.Duration(i) * time.Second))
		node.Name = fmt.Sprintf("node-%0*d", i%300, i)
		sum := sha256.Sum256([]byte(node.Name))
		switch i % 4 {
		case 0:
			node.LastSent.Digest, node.LastSent.ContentDigest, node.LastReport.Digest = hex.EncodeToString(sum[:]), hexDigest, hex.EncodeToString(sum[:])
		case 1:
			node.LastReport = nil
		case 2:
			node.LastSent, node.LastReport = nil, nil
		}
		out[i] = EncodeNode(node)
	}
	return out
}

// Rows decoded in runs into an arena each are the rows decoded one at a
// time, over several runs, brief and whole.
func TestARunDecodesAsEachRowAlone(t *testing.T) {
	rows := arenaRows(2*Run + 17)
	for _, brief := range []bool{true, false} {
		want := make([]Node, len(rows))
		for i, r := range rows {
			n, err := DecodeNodeAs(r, brief)
			if err != nil {
				t.Fatal(err)
			}
			want[i] = n
		}
		got, errs := make([]Node, len(rows)), make([]error, len(rows))
		for lo := 0; lo < len(rows); lo += Run {
			DecodeRun(rows[lo:min(lo+Run, len(rows))], brief, false, got[lo:], errs[lo:])
		}
		for i, err := range errs {
			if err != nil {
				t.Fatalf("row %d: %v", i, err)
			}
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("brief %v (-alone +in runs):\n%s", brief, diff)
		}
	}
}

// A run's strings, sends and reports are its arena's three pieces, not an
// object each (what it is for); alone, each is an object.
func TestARunAllocatesItsArenaNotEachString(t *testing.T) {
	rows := arenaRows(Run)
	out, errs := make([]Node, len(rows)), make([]error, len(rows))
	packed := testing.AllocsPerRun(5, func() { DecodeRun(rows, true, false, out, errs) })
	alone := testing.AllocsPerRun(5, func() { DecodeRun(rows, true, true, out, errs) })
	// The failures of each report are a slice of their own either way.
	if reports := float64(len(rows) / 2); packed > reports+10 || alone < 4*float64(len(rows)) {
		t.Fatalf("decoding %d rows allocated %.0f times in a run and %.0f alone; want at most %.0f in a run", len(rows), packed, alone, reports+10)
	}
}
