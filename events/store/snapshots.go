package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Read-model snapshots on the bus (issue 34): a controller with no read
// models of its own (a new machine, a restored home, a reset) starts from
// the newest snapshot another controller of this mesh published and folds
// only the stream's tail, rather than every event from the first. The
// bytes are opaque here: what they hold, how they are proven and when one
// may be used is projections'. Here is only where they live.

// SnapshotBucket is the object store the snapshots are kept in: a bucket
// of its own, so that a permission granting another bucket (a node's
// artifacts) never grants read models, which name every node and module.
const SnapshotBucket = "mesh-read-models"

// keepSnapshots is how many snapshots the bucket keeps: the newest, and
// the one before it for a start that began reading it as it was replaced.
const keepSnapshots = 2

// Snapshot is one published snapshot: its object name, the stream sequence
// its read models are folded up to, its size, the digest the object store
// keeps of its bytes (checked as they are read back), and the fields its
// publisher gave (identity, schema, proof).
type Snapshot struct {
	Name       string
	Checkpoint uint64
	Size       uint64
	Digest     string
	Fields     map[string]string
}

// snapshotName orders names by checkpoint as strings do. A brief
// snapshot (PutBrief) is the same read models without their history index,
// named apart so that nothing that lists the whole ones ever reads one.
func snapshotName(checkpoint uint64, brief bool) string {
	return fmt.Sprintf("%s%020d", snapshotPrefix(brief), checkpoint)
}

func snapshotPrefix(brief bool) string {
	if brief {
		return "read-models-brief-"
	}
	return "read-models-"
}

// snapshots opens the bucket, making it (with the stream's replicas, so a
// cluster keeps it as it keeps the log) when create is set.
func (s *Store) snapshots(ctx context.Context, create bool) (jetstream.ObjectStore, error) {
	obs, err := s.js.ObjectStore(ctx, SnapshotBucket)
	if err == nil || !create || !errors.Is(err, jetstream.ErrBucketNotFound) {
		return obs, err
	}
	replicas := 1
	if s.stream != nil {
		replicas = s.stream.CachedInfo().Config.Replicas
	}
	return s.js.CreateOrUpdateObjectStore(ctx, jetstream.ObjectStoreConfig{
		Bucket:      SnapshotBucket,
		Description: "the mesh's read models, folded up to a stream sequence, for a controller to start from",
		Storage:     jetstream.FileStorage,
		Replicas:    replicas,
	})
}

// PutSnapshot streams r into the bucket as the snapshot at checkpoint, then
// asks prove for the fields to record beside it given the digest the
// object store computed of exactly what it stored (the proof must cover
// that digest, which is known only once every byte is in). Older
// snapshots beyond the newest two are removed. r is read once, in chunks:
// the snapshot is never held whole in memory.
func (s *Store) PutSnapshot(ctx context.Context, checkpoint uint64, r io.Reader, prove func(digest string) map[string]string) (Snapshot, error) {
	return s.putSnapshot(ctx, checkpoint, false, r, prove)
}

// PutBrief is PutSnapshot of a brief snapshot: the read models without
// their history index, which a start fetches before it serves and the
// whole snapshot's history after (projections/published). Listed by
// Briefs, thinned to the newest two of their own.
func (s *Store) PutBrief(ctx context.Context, checkpoint uint64, r io.Reader, prove func(digest string) map[string]string) (Snapshot, error) {
	return s.putSnapshot(ctx, checkpoint, true, r, prove)
}

func (s *Store) putSnapshot(ctx context.Context, checkpoint uint64, brief bool, r io.Reader, prove func(digest string) map[string]string) (Snapshot, error) {
	obs, err := s.snapshots(ctx, true)
	if err != nil {
		return Snapshot{}, fmt.Errorf("store: cannot open the %s object store: %w", SnapshotBucket, err)
	}
	name := snapshotName(checkpoint, brief)
	info, err := obs.Put(ctx, jetstream.ObjectMeta{Name: name, Opts: &jetstream.ObjectMetaOptions{ChunkSize: s.snapshotChunk()}}, r)
	if err != nil {
		return Snapshot{}, fmt.Errorf("store: cannot store snapshot %s: %w", name, err)
	}
	// Once stored, it is finished and the bucket thinned even if ctx
	// ends now (a controller closing): a snapshot left without its proof
	// is never used, and one too many is never removed otherwise.
	done, cancel := s.bound(context.WithoutCancel(ctx))
	defer cancel()
	fields := prove(info.Digest)
	if err := obs.UpdateMeta(done, name, jetstream.ObjectMeta{Name: name, Metadata: fields}); err != nil {
		obs.Delete(done, name)
		return Snapshot{}, fmt.Errorf("store: cannot record snapshot %s's proof: %w", name, err)
	}
	all, err := s.list(done, brief)
	if err == nil {
		for i := 0; i+keepSnapshots < len(all); i++ {
			obs.Delete(done, all[i].Name)
		}
	}
	return Snapshot{Name: name, Checkpoint: checkpoint, Size: info.Size, Digest: info.Digest, Fields: fields}, nil
}

// snapshotChunk is the size of the pieces a snapshot is stored in: a MiB,
// or less where the bus takes smaller messages, against the object
// store's default of 128 KiB. A snapshot of ten million events is some
// hundreds of MiB, read whole before a controller serves; each piece is a
// message that the bus stores, the reader is handed and acknowledges, so
// 8 times fewer cost each less (reading 200 MiB on this loaded box:
// 84-91 MiB/s in pieces of 128 KiB, 125-381 in pieces of 1,000 KiB).
func (s *Store) snapshotChunk() uint32 {
	limit := int64(1 << 20)
	if s.nc != nil && s.nc.MaxPayload() > 0 {
		limit = min(limit, s.nc.MaxPayload())
	}
	// Room for the piece's headers within the bus's limit.
	return uint32(max(limit-4<<10, limit/2))
}

// Snapshots lists the published snapshots, oldest first; none when the
// bucket was never made.
func (s *Store) Snapshots(ctx context.Context) ([]Snapshot, error) { return s.list(ctx, false) }

// Briefs lists the published brief snapshots (PutBrief), oldest first.
func (s *Store) Briefs(ctx context.Context) ([]Snapshot, error) { return s.list(ctx, true) }

func (s *Store) list(ctx context.Context, brief bool) ([]Snapshot, error) {
	obs, err := s.snapshots(ctx, false)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("store: cannot open the %s object store: %w", SnapshotBucket, err)
	}
	infos, err := obs.List(ctx)
	if errors.Is(err, jetstream.ErrNoObjectsFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("store: cannot list the snapshots: %w", err)
	}
	var out []Snapshot
	for _, in := range infos {
		cp, ok := parseSnapshotName(in.Name, brief)
		if !ok || in.Deleted {
			continue // not one of this kind: never read as one
		}
		out = append(out, Snapshot{Name: in.Name, Checkpoint: cp, Size: in.Size, Digest: in.Digest, Fields: in.Metadata})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Checkpoint < out[j].Checkpoint })
	return out, nil
}

// parseSnapshotName is the checkpoint of a snapshot's name, of the kind
// asked for (brief or whole): exactly the name snapshotName gives it.
func parseSnapshotName(name string, brief bool) (uint64, bool) {
	digits, ok := strings.CutPrefix(name, snapshotPrefix(brief))
	cp, err := strconv.ParseUint(digits, 10, 64)
	return cp, ok && err == nil && snapshotName(cp, brief) == name
}

// OpenSnapshot reads a snapshot's bytes. The reader fails at its end if
// they are not the bytes whose digest the snapshot names (the object
// store checks as it reads), so a reader must read to the end before it
// trusts anything it read.
//
// The read as a whole is bounded by its size, not by one call's bound: a
// snapshot is hundreds of MiB at millions of events, longer to read than
// one call may wait. Under the library's default bound (the one every
// call without a deadline gets), every read past 5 s failed "nats:
// timeout", and a controller with no read models passed over both
// snapshots of a 3.8M-event stream and folded it from the first event
// for 165 s (docs/performance.md, "A start from a snapshot on the bus").
// Asking for the object's description still waits at most one call's
// bound; ctx's own deadline, when sooner, wins.
func (s *Store) OpenSnapshot(ctx context.Context, sn Snapshot) (io.ReadCloser, error) {
	obs, err := s.snapshots(ctx, false)
	if err != nil {
		return nil, fmt.Errorf("store: cannot open the %s object store: %w", SnapshotBucket, err)
	}
	wait := cmp.Or(s.Timeout, CallTimeout)
	ctx, cancel := context.WithTimeout(ctx, snapshotReadBound(wait, sn.Size))
	asked := time.AfterFunc(wait, cancel)
	r, err := obs.Get(ctx, sn.Name)
	asked.Stop()
	if err != nil {
		cancel()
		return nil, fmt.Errorf("store: cannot read snapshot %s: %w", sn.Name, err)
	}
	info, err := r.Info()
	if err == nil && info.Digest != sn.Digest {
		err = fmt.Errorf("store: snapshot %s changed since it was listed (digest %s, listed %s)", sn.Name, info.Digest, sn.Digest)
	}
	if err != nil {
		r.Close()
		cancel()
		return nil, err
	}
	return snapshotReader{r, cancel}, nil
}

// snapshotReadRate is the slowest read of a snapshot that is not taken for
// a stalled bus: 8 times below the slowest measured (33 MiB/s on two
// loaded cores).
const snapshotReadRate = 4 << 20 // bytes a second

// snapshotReadBound is how long reading a snapshot of size bytes may take.
func snapshotReadBound(wait time.Duration, size uint64) time.Duration {
	return wait + time.Duration(float64(size)/snapshotReadRate*float64(time.Second))
}

// snapshotReader ends the read's deadline with the read.
type snapshotReader struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (r snapshotReader) Close() error {
	err := r.ReadCloser.Close()
	r.cancel()
	return err
}

// Uint is a field of a snapshot read as a number (0 when absent or not one).
func (sn Snapshot) Uint(field string) uint64 {
	n, _ := strconv.ParseUint(sn.Fields[field], 10, 64)
	return n
}
