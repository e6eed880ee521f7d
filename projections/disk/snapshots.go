package disk

import (
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// A snapshot is named by the last event it holds and the latest moment of
// any event it holds: it may answer a moment at or after that moment (the
// fold into the past stops at the first event after its moment, in stream
// order, so every event a snapshot holds must be at or before it).

// maxSnapshots bounds how many are kept (and the disk they hold): past it,
// the one whose neighbours are closest goes, so they stay evenly spread
// over the whole log and no moment is further from one than the rest.
// Thinning the older half instead left a gap of 220,000 events at a
// million, and status --as-of there took 4 s.
const maxSnapshots = 40

const snapshotsDirName = "snapshots"

// Snapshot is one kept: the directory's name, the last event it holds and
// the latest moment of any event it holds (unix nanoseconds).
type Snapshot struct {
	Name       string
	Checkpoint uint64
	Latest     int64
}

// SnapshotsDir is where the snapshots are kept.
func (d Dir) SnapshotsDir() string { return d.Join(snapshotsDirName) }

// Snapshots lists the finished snapshots, oldest first. Half-made ones
// (tmp-), and copies made for time travel (copy-) are not among them.
func (d Dir) Snapshots() []Snapshot {
	names, _ := d.FS.List(d.SnapshotsDir())
	var out []Snapshot
	for _, n := range names {
		cp, latest, ok := strings.Cut(n, "-")
		c, err1 := strconv.ParseUint(cp, 10, 64)
		l, err2 := strconv.ParseInt(latest, 10, 64)
		if ok && err1 == nil && err2 == nil {
			out = append(out, Snapshot{Name: n, Checkpoint: c, Latest: l})
		}
	}
	slices.SortFunc(out, func(a, b Snapshot) int { return cmp.Compare(a.Checkpoint, b.Checkpoint) })
	return out
}

// ClearLeftovers removes what a crash left half made, at open.
func (d Dir) ClearLeftovers() {
	names, _ := d.FS.List(d.SnapshotsDir())
	for _, n := range names {
		if strings.HasPrefix(n, "tmp-") || strings.HasPrefix(n, "copy-") {
			d.FS.RemoveAll(d.FS.PathJoin(d.SnapshotsDir(), n))
		}
	}
}

// TakeSnapshot checkpoints the read models db into the snapshots
// directory, named by what they hold (last, latest), and thins old ones.
func (d Dir) TakeSnapshot(db *pebble.DB, last uint64, latest int64) error {
	dir := d.SnapshotsDir()
	if err := d.FS.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	name := d.FS.PathJoin(dir, fmt.Sprintf("%020d-%020d", last, latest))
	if _, err := d.FS.Stat(name); err == nil {
		return nil // nothing folded since that one
	}
	tmp := d.FS.PathJoin(dir, "tmp-"+randomName())
	// Flushed: the fold commits without syncing, and what the log has not
	// synced would be missing from the checkpoint's copy of it.
	if err := db.Checkpoint(tmp, pebble.WithFlushedWAL()); err != nil {
		d.FS.RemoveAll(tmp)
		return err
	}
	if err := d.FS.Rename(tmp, name); err != nil {
		d.FS.RemoveAll(tmp)
		return err
	}
	for s := d.Snapshots(); len(s) > maxSnapshots; s = d.Snapshots() {
		d.FS.RemoveAll(d.FS.PathJoin(dir, s[closest(s)].Name))
	}
	return nil
}

// closest is the snapshot, neither the first nor the last, whose
// neighbours are closest together: the one whose going leaves the smallest
// gap.
func closest(s []Snapshot) int {
	best, gap := 1, uint64(math.MaxUint64)
	for i := 1; i < len(s)-1; i++ {
		if g := s[i+1].Checkpoint - s[i-1].Checkpoint; g < gap {
			best, gap = i, g
		}
	}
	return best
}

// Newest is the newest snapshot that may answer the moment at (unix
// nanoseconds): every event it holds is at or before at. ok is false when
// none may.
func (d Dir) Newest(at int64) (best Snapshot, ok bool) {
	for _, s := range d.Snapshots() {
		if s.Latest <= at {
			best, ok = s, true
		}
	}
	return best, ok
}

// LinkSnapshot makes a directory of read models holding s as its one
// generation, for time travel to fold on from, and answers its path: the
// snapshot's tables hard-linked (Pebble never writes a table twice), its
// other files (manifest, log) copied, since the copy writes them. It is
// made among the snapshots (copy-), so that a crash leaves it where open
// clears it; whoever opens it removes it when done.
func (d Dir) LinkSnapshot(s Snapshot) (string, error) {
	dir := d.FS.PathJoin(d.SnapshotsDir(), "copy-"+randomName())
	if err := link(d.FS, d.FS.PathJoin(d.SnapshotsDir(), s.Name), dir); err != nil {
		d.FS.RemoveAll(dir)
		return "", err
	}
	return dir, nil
}

func link(fs vfs.FS, from, dir string) error {
	gen := GenerationName(1)
	if err := fs.MkdirAll(fs.PathJoin(dir, gen), 0o755); err != nil {
		return err
	}
	names, err := fs.List(from)
	if err != nil {
		return err
	}
	for _, n := range names {
		src, dst := fs.PathJoin(from, n), fs.PathJoin(dir, gen, n)
		if strings.HasSuffix(n, ".sst") {
			if err := fs.Link(src, dst); err != nil {
				return err
			}
			continue
		}
		if err := copyFile(fs, src, dst); err != nil {
			return err
		}
	}
	f, err := fs.Create(fs.PathJoin(dir, currentFile), "")
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = f.Write([]byte(gen + "\n"))
	return err
}

func copyFile(fs vfs.FS, src, dst string) error {
	in, err := fs.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := fs.Create(dst, "")
	if err != nil {
		return err
	}
	defer out.Close()
	_, err = io.Copy(out, in)
	return err
}

func randomName() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
