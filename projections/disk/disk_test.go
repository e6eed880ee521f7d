package disk

import (
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// Thinning keeps snapshots evenly spread: the one dropped is the one
// whose neighbours are closest, never the first or the last.
func TestThinningDropsTheClosest(t *testing.T) {
	s := []Snapshot{{Checkpoint: 10}, {Checkpoint: 20}, {Checkpoint: 22}, {Checkpoint: 40}, {Checkpoint: 50}}
	if i := closest(s); i != 1 && i != 2 {
		t.Fatalf("dropped snapshot %d (at %d); want one of the two close together", i, s[i].Checkpoint)
	}
	if i := closest(s[:3]); i != 1 {
		t.Fatalf("of three, dropped %d; only the middle one may go", i)
	}
}

// CURRENT names nothing in a new directory, the generation last set after,
// and a name that is not a generation is refused with the remedy, never
// taken for generation 0.
func TestCurrentNamesTheGenerationSet(t *testing.T) {
	d := Dir{FS: vfs.NewMem(), Path: "/models"}
	if err := d.Create(); err != nil {
		t.Fatal(err)
	}
	if gen, err := d.Current(); gen != "" || err != nil {
		t.Fatalf("a new directory names %q (%v), want nothing", gen, err)
	}
	for _, n := range []int{1, 2} {
		if err := d.SetCurrent(GenerationName(n)); err != nil {
			t.Fatal(err)
		}
		if gen, err := d.Current(); gen != GenerationName(n) || err != nil || GenerationNumber(gen) != n {
			t.Fatalf("CURRENT names %q (%v), want %s", gen, err, GenerationName(n))
		}
	}
	f, err := d.FS.Create(d.Join(currentFile), "")
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("elsewhere\n"))
	f.Close()
	if _, err := d.Current(); err == nil || !strings.Contains(err.Error(), "not a generation") {
		t.Fatalf("CURRENT naming %q read as %v", "elsewhere", err)
	}
}

// Only finished snapshots are listed, oldest first; what a crash left half
// made (tmp-, copy-) is not, and goes at open. Newest answers a moment only
// from a snapshot holding nothing after it.
func TestSnapshotsListedAndCleared(t *testing.T) {
	d := Dir{FS: vfs.NewMem(), Path: "/models"}
	for _, n := range []string{"00000000000000000020-00000000000000000200", "00000000000000000010-00000000000000000100", "tmp-ab", "copy-cd"} {
		if err := d.FS.MkdirAll(d.FS.PathJoin(d.SnapshotsDir(), n), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	s := d.Snapshots()
	if len(s) != 2 || s[0].Checkpoint != 10 || s[0].Latest != 100 || s[1].Checkpoint != 20 {
		t.Fatalf("listed %+v", s)
	}
	if _, ok := d.Newest(99); ok {
		t.Fatal("a moment before every snapshot's latest event was answered from one")
	}
	if best, ok := d.Newest(150); !ok || best.Checkpoint != 10 {
		t.Fatalf("as of 150: %+v %v, want the snapshot at 10", best, ok)
	}
	d.ClearLeftovers()
	if names, _ := d.FS.List(d.SnapshotsDir()); len(names) != 2 {
		t.Fatalf("after clearing, the snapshots directory holds %v", names)
	}
}
