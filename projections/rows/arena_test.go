package rows

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/meshctl/mesh/embedded/embeddedtest"
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

// A run's strings, sends and reports are its arena's three pieces, not an
// object each (what it is for); alone, each is an object.
func TestARunAllocatesItsArenaNotEachString(t *testing.T) {
	rows := arenaRows(Run)
	packed := testing.AllocsPerRun(5, func() { _ = EachRun(rows, true, true, func(int, Node, error) error { return nil }) })
	alone := testing.AllocsPerRun(5, func() {
		for _, r := range rows {
			_, _ = DecodeNodeAs(r, true)
		}
	})
	// The failures of each report are a slice of their own either way.
	if reports := float64(len(rows) / 2); packed > reports+10 || alone < 4*float64(len(rows)) {
		t.Fatalf("decoding %d rows allocated %.0f times in a run and %.0f alone; want at most %.0f in a run", len(rows), packed, alone, reports+10)
	}
}

// Rows handed one at a time (EachRun) are the rows decoded alone, in
// order, whether each run has an arena of its own or one serves them all;
// with one, the runs after the first allocate nothing for their strings,
// sends and reports, and each run's own arena allocates its pieces again.
// Fails when a shared arena's arrays are not written again run after run.
func TestEachRunHandsEachRowAsDecodedAlone(t *testing.T) {
	rows := arenaRows(4*Run + 5)
	for _, c := range []struct{ brief, keep bool }{{true, true}, {true, false}, {false, true}, {false, false}} {
		brief, keep := c.brief, c.keep
		seen := 0
		err := EachRun(rows, brief, keep, func(i int, n Node, err error) error {
			want, werr := DecodeNodeAs(rows[i], brief)
			if err != nil || werr != nil || i != seen {
				return fmt.Errorf("row %d (handed %d): %v, alone %v", i, seen, err, werr)
			}
			seen++
			// Compared while it is handed: after fn returns, a shared
			// arena's next run writes over it.
			if diff := cmp.Diff(want, n); diff != "" {
				return fmt.Errorf("row %d (-alone +handed):\n%s", i, diff)
			}
			return nil
		})
		if err != nil || seen != len(rows) {
			t.Fatalf("brief %v, keep %v: %v after %d of %d rows", brief, keep, err, seen, len(rows))
		}
	}
	// Rows whose reports fail nothing: a report's failures are a slice of
	// their own however the row is decoded. Two arenas in turn allocate
	// for eight runs what they allocate for four (their arrays, sends and
	// reports written again); an arena a run allocates them again a run.
	plain := make([][]byte, 8*Run)
	for i := range plain {
		n, err := DecodeNode(rows[i%len(rows)])
		if err != nil {
			t.Fatal(err)
		}
		if n.LastReport != nil {
			n.LastReport.Failed = nil
		}
		plain[i] = EncodeNode(n)
	}
	count := func(rows [][]byte, keep bool) float64 {
		return testing.AllocsPerRun(3, func() { _ = EachRun(rows, true, keep, func(int, Node, error) error { return nil }) })
	}
	four, eight := count(plain[:4*Run], false), count(plain, false)
	ownFour, ownEight := count(plain[:4*Run], true), count(plain, true)
	if eight > four+2 || ownEight < ownFour+4*3 {
		t.Fatalf("two arenas in turn allocated %.0f times for four runs and %.0f for eight (want at most %.0f); an arena a run %.0f and %.0f", four, eight, four+2, ownFour, ownEight)
	}
}

// A row that does not decode is handed with its error, and what fn
// answers ends the walk.
func TestEachRunHandsACorruptRowItsError(t *testing.T) {
	// In one run (decoded in line), and in the third of five (decoded on
	// the goroutine beside fn, which must stop and let EachRun answer).
	for _, c := range []struct{ rows, corrupt int }{{5, 2}, {5*Run + 7, 2*Run + 9}} {
		rows := arenaRows(c.rows)
		rows[c.corrupt] = rows[c.corrupt][:len(rows[c.corrupt])-3]
		stop := fmt.Errorf("stop")
		handed := 0
		err := EachRun(rows, true, false, func(i int, _ Node, err error) error {
			handed++
			if err != nil {
				if err != ErrCorrupt {
					t.Errorf("row %d: %v, want ErrCorrupt", i, err)
				}
				return stop
			}
			return nil
		})
		if err != stop || handed != c.corrupt+1 {
			t.Fatalf("EachRun answered %v after %d rows; want the walk ended at row %d", err, handed, c.corrupt)
		}
	}
}

// A panic in fn, past the first run, reaches EachRun's caller as a panic,
// and the goroutine decoding the next run ends: left waiting for a run fn
// would never give back, it held every row and two runs, one more each
// time (a status behind net/http's recover, asked every second by the
// page). Fails when the decoder outlives the walk.
func TestAPanicInFnEndsTheDecoder(t *testing.T) {
	rows := arenaRows(5 * Run)
	before := runtime.NumGoroutine()
	for range 10 {
		func() {
			defer func() {
				if r := recover(); r != "fn" {
					t.Fatalf("recovered %v, want fn's panic", r)
				}
			}()
			_ = EachRun(rows, true, false, func(i int, _ Node, _ error) error {
				if i == Run+3 {
					panic("fn")
				}
				return nil
			})
		}()
	}
	embeddedtest.Eventually(t, "the decoders to end", func() bool { return runtime.NumGoroutine() <= before })
}
