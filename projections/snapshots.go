package projections

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/meshctl/mesh/events/store"
)

// Time travel (status --as-of, node show --as-of) folds the stream up to a
// moment into a copy of the read models. From the stream's start that is a
// whole rebuild: at a million events it ran past any command's timeout. So
// the live fold leaves a snapshot of the read models every SnapshotEvery
// events (a Pebble checkpoint: its tables hard-linked, nothing copied), and
// a fold into the past starts from the newest snapshot that holds nothing
// later than the moment asked about, folding at most SnapshotEvery events.
//
// A snapshot is named by the last event it holds and the latest moment of
// any event it holds: it may answer a moment at or after that moment (the
// fold into the past stops at the first event after its moment, in stream
// order, so every event a snapshot holds must be at or before it).

// DefaultSnapshotEvery is how many events apart the controller's snapshots
// are: at the fold's rate, half a second of folding from one. At 50,000,
// status --as-of at a million events took 1.1 to 3 s, most of it folding.
const DefaultSnapshotEvery = 25_000

// maxSnapshots bounds how many are kept (and the disk they hold): past it,
// the one whose neighbours are closest goes, so they stay evenly spread
// over the whole log and no moment is further from one than the rest.
// Thinning the older half instead left a gap of 220,000 events at a
// million, and status --as-of there took 4 s.
const maxSnapshots = 40

const snapshotsDirName = "snapshots"

type savedSnapshot struct {
	name       string
	checkpoint uint64
	latest     int64 // unix nanoseconds
}

func (e *Engine) snapshotsDir() string { return e.fs.PathJoin(e.o.Dir, snapshotsDirName) }

// snapshots lists the finished snapshots, oldest first. Half-made ones
// (tmp-), and copies made for time travel (copy-) are not among them.
func (e *Engine) snapshots() []savedSnapshot {
	names, _ := e.fs.List(e.snapshotsDir())
	var out []savedSnapshot
	for _, n := range names {
		cp, latest, ok := strings.Cut(n, "-")
		c, err1 := strconv.ParseUint(cp, 10, 64)
		l, err2 := strconv.ParseInt(latest, 10, 64)
		if ok && err1 == nil && err2 == nil {
			out = append(out, savedSnapshot{name: n, checkpoint: c, latest: l})
		}
	}
	slices.SortFunc(out, func(a, b savedSnapshot) int { return cmp.Compare(a.checkpoint, b.checkpoint) })
	return out
}

// clearSnapshotLeftovers removes what a crash left half made, at open.
func (e *Engine) clearSnapshotLeftovers() {
	names, _ := e.fs.List(e.snapshotsDir())
	for _, n := range names {
		if strings.HasPrefix(n, "tmp-") || strings.HasPrefix(n, "copy-") {
			e.fs.RemoveAll(e.fs.PathJoin(e.snapshotsDir(), n))
		}
	}
	if s := e.snapshots(); len(s) > 0 {
		e.lastSnap.Store(s[len(s)-1].checkpoint)
	}
}

// maybeSnapshot keeps a snapshot of the live read models when the live
// fold has committed SnapshotEvery events since the last one. It runs in
// the fold, right after a commit, so it knows exactly what the snapshot
// holds: a Pebble checkpoint costs a log sync and a hard link a table.
func (e *Engine) maybeSnapshot(db *pebble.DB, last uint64, latest int64) {
	if e.o.SnapshotEvery == 0 || last < e.lastSnap.Load()+e.o.SnapshotEvery {
		return
	}
	e.lastSnap.Store(last)
	if err := e.takeSnapshot(db, last, latest); err != nil {
		e.o.Log.Warn("cannot keep a snapshot of the read models for time travel (as-of answers fold from further back)", "err", err)
	}
}

// takeSnapshot checkpoints the read models into the snapshots directory,
// named by what they hold, and thins old ones.
func (e *Engine) takeSnapshot(db *pebble.DB, last uint64, latest int64) error {
	dir := e.snapshotsDir()
	if err := e.fs.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	name := e.fs.PathJoin(dir, fmt.Sprintf("%020d-%020d", last, latest))
	if _, err := e.fs.Stat(name); err == nil {
		return nil // nothing folded since that one
	}
	tmp := e.fs.PathJoin(dir, "tmp-"+randomName())
	// Flushed: the fold commits without syncing, and what the log has not
	// synced would be missing from the checkpoint's copy of it.
	if err := db.Checkpoint(tmp, pebble.WithFlushedWAL()); err != nil {
		e.fs.RemoveAll(tmp)
		return err
	}
	if err := e.fs.Rename(tmp, name); err != nil {
		e.fs.RemoveAll(tmp)
		return err
	}
	for s := e.snapshots(); len(s) > maxSnapshots; s = e.snapshots() {
		e.fs.RemoveAll(e.fs.PathJoin(dir, s[closest(s)].name))
	}
	return nil
}

// closest is the snapshot, neither the first nor the last, whose
// neighbours are closest together: the one whose going leaves the smallest
// gap.
func closest(s []savedSnapshot) int {
	best, gap := 1, uint64(math.MaxUint64)
	for i := 1; i < len(s)-1; i++ {
		if g := s[i+1].checkpoint - s[i-1].checkpoint; g < gap {
			best, gap = i, g
		}
	}
	return best
}

// copyFromSnapshot answers read models folded up to moment at, starting
// from the newest snapshot that may answer it; nil when none may.
func (e *Engine) copyFromSnapshot(ctx context.Context, at time.Time) (*Engine, error) {
	var best *savedSnapshot
	for _, s := range e.snapshots() {
		if s.latest <= at.UnixNano() {
			best = &s
		}
	}
	if best == nil {
		return nil, nil
	}
	dir := e.fs.PathJoin(e.snapshotsDir(), "copy-"+randomName())
	if err := linkSnapshot(e.fs, e.fs.PathJoin(e.snapshotsDir(), best.name), dir); err != nil {
		e.fs.RemoveAll(dir)
		return nil, err
	}
	cp, _, err := Open(ctx, Options{Dir: dir, FS: e.fs, Store: e.o.Store, BatchSize: e.o.BatchSize, Keys: e.o.Keys, Log: e.o.Log, Brief: true})
	if err != nil {
		e.fs.RemoveAll(dir)
		return nil, err
	}
	cp.dropDir = true
	f := cp.newFolder(cp.db, cp.committed)
	f.asOf = at
	err = cp.fold(ctx, store.ReadOptions{From: best.checkpoint + 1}, f)
	f.discard()
	if err != nil && !errors.Is(err, errPast) {
		cp.Close()
		return nil, err
	}
	return cp, nil
}

// linkSnapshot makes dir a generation of read models holding the snapshot
// at from: its tables hard-linked (Pebble never writes a table twice), its
// other files (manifest, log) copied, since the copy writes them.
func linkSnapshot(fs vfs.FS, from, dir string) error {
	gen := generationName(1)
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
