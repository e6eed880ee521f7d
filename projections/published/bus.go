package published

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/meshctl/mesh/events/store"
	"github.com/meshctl/mesh/projections/disk"
)

// Bus publishes one controller's read models to the bus and fetches them
// back. A value: the engine makes one when it publishes, starts or
// verifies.
type Bus struct {
	// Dir is where the read models live: its newest kept snapshot is what
	// is published, and a verify fetches beside it.
	Dir   disk.Dir
	Store *store.Store
	Log   *slog.Logger
	// MAC is the key the controller proves its events with (rule 19): a
	// snapshot proven by any other is passed over.
	MAC []byte
	// Schema is the schema this binary folds: a snapshot of another is
	// stale, never started from.
	Schema uint64
	Models Models
}

// Models is what only the read models' own package can say of a copy of
// them; projections' engine answers it.
type Models interface {
	// Options are Pebble's options for read models in a directory: read
	// only, or to be written in bulk (no log, the live models' tables).
	Options(readOnly bool) *pebble.Options
	// Identity reads the stream read models were folded from, and their
	// schema.
	Identity(r pebble.Reader) (Identity, error)
	// Checkpoint reads the event read models are folded up to.
	Checkpoint(r pebble.Reader) uint64
	// History is the span of the history index's rows, and HistorySeq
	// the event a row of it (by its key) indexes: a brief snapshot is one
	// without that span, which a start fills in after it serves.
	History() pebble.KeyRange
	HistorySeq(key []byte) uint64
	// SameBrief answers how brief differs from whole outside the history
	// index and brief's mark ("" when it does not).
	SameBrief(brief, whole pebble.Reader) (string, error)
	// BriefMark is the row a brief snapshot of checkpoint carries.
	BriefMark(checkpoint uint64) (key, value []byte)
	// Compare folds the stream afresh from its first event up to at, in
	// dir, and answers how held differs from it ("" when it does not).
	Compare(ctx context.Context, held pebble.Reader, at uint64, dir string) (string, error)
}

// Identity is what read models were folded from.
type Identity struct {
	Stream  string
	Created time.Time
	Schema  uint64
}

// The fields recorded beside a published snapshot.
const (
	FieldStream  = "stream"
	FieldCreated = "created"
	FieldSchema  = "schema"
	FieldProof   = "proof"
)

// Proof is the MAC that makes a snapshot the controller's.
func (b Bus) Proof(stream, created string, schema, checkpoint uint64, digest string) string {
	return b.ProofOf(stream, created, schema, checkpoint, digest, false)
}

// ProofOf is Proof of a whole snapshot or a brief one. The kind is in the
// MAC'd prefix, which nothing on the bus can change: marked in the digest
// instead (which the object's writer gives), a brief one's proof passed
// for a whole one's under a digest written to match, and a start served
// read models with no history index and no marker saying so.
func (b Bus) ProofOf(stream, created string, schema, checkpoint uint64, digest string, brief bool) string {
	kind := "snapshot"
	if brief {
		kind = "brief snapshot"
	}
	m := hmac.New(sha256.New, b.MAC)
	// A prefix no event's MAC'd bytes begin with (they are subjects and
	// JSON), so this MAC can never pass for one.
	fmt.Fprintf(m, "mesh read-model %s\x00%s\x00%s\x00%d\x00%d\x00%s", kind, stream, created, schema, checkpoint, digest)
	return hex.EncodeToString(m.Sum(nil))
}

// Publish puts the newest local snapshot of the read models (the ones
// time travel starts from) on the bus, with its proof. Nothing to publish
// (no local snapshot yet) is said as an error, and so is one no newer than
// the newest already published.
func (b Bus) Publish(ctx context.Context) (store.Snapshot, error) {
	snaps := b.Dir.Snapshots()
	if len(snaps) == 0 {
		return store.Snapshot{}, errors.New("projections: no snapshot of the read models is kept yet to publish")
	}
	newest := snaps[len(snaps)-1]
	// A linked copy: the fold thins its snapshots while this one is read.
	dir, err := b.Dir.LinkSnapshot(newest)
	if err != nil {
		return store.Snapshot{}, err
	}
	fs := b.Dir.FS
	defer fs.RemoveAll(dir)
	src := fs.PathJoin(dir, disk.GenerationName(1))
	if err := b.withoutLog(ctx, src); err != nil {
		return store.Snapshot{}, err
	}
	id, err := b.identityOf(src)
	if err != nil {
		return store.Snapshot{}, err
	}
	created := id.Created.UTC().Format(time.RFC3339Nano)
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(disk.Pack(fs, src, pw)) }()
	sn, err := b.Store.PutSnapshot(ctx, newest.Checkpoint, pr, func(digest string) map[string]string {
		return map[string]string{FieldStream: id.Stream, FieldCreated: created, FieldSchema: strconv.FormatUint(id.Schema, 10),
			FieldProof: b.Proof(id.Stream, created, id.Schema, newest.Checkpoint, digest)}
	})
	pr.CloseWithError(err) // the packer stops if the store did
	if err != nil {
		return sn, err
	}
	// The brief one after the whole: a start that finds a brief one finds
	// the whole one whose history it fills in from. Without it a start
	// fetches the whole one, as before, so a brief one not published is
	// said and no more.
	if err := b.publishBrief(ctx, src, newest.Checkpoint, id); err != nil {
		b.Log.Warn("cannot publish the brief snapshot of the read models (a new controller fetches the whole one before it serves)", "err", err)
	}
	return sn, nil
}

// publishBrief publishes the read models in src (the whole snapshot's
// copy, compacted) without their history index: every other row read in
// key order into one new table, which a fresh Pebble ingests whole, so the
// brief one holds not a byte of the history. (Pebble's Excise on a linked
// copy was tried first: it keeps a table straddling the history's edge
// whole as a virtual table over the same file, and a small mesh's history
// shares one table with everything else, so the brief one was as large.)
// At ten million events the history index is nine tenths of a snapshot's
// bytes, and a start that fetched them before serving took 5.8 to 9.9 s
// (docs/performance.md, "A start from a snapshot on the bus").
func (b Bus) publishBrief(ctx context.Context, src string, checkpoint uint64, id Identity) error {
	fs := b.Dir.FS
	dir := src + "-brief"
	if err := fs.RemoveAll(dir); err != nil {
		return err
	}
	defer fs.RemoveAll(dir)
	from, err := pebble.Open(src, b.Models.Options(true))
	if err != nil {
		return fmt.Errorf("projections: cannot read the snapshot in %s: %w", src, err)
	}
	defer from.Close()
	path := fs.PathJoin(dir, "models")
	db, err := pebble.Open(path, b.Models.Options(false))
	if err != nil {
		return fmt.Errorf("projections: cannot make the brief copy in %s: %w", path, err)
	}
	span := b.Models.History()
	table := fs.PathJoin(dir, "rows.sst")
	n, err := b.writeRows(from, table, db.TableFormat(), nil, pebble.IterOptions{UpperBound: span.Start}, pebble.IterOptions{LowerBound: span.End})
	if err == nil && n > 0 {
		err = db.Ingest(ctx, []string{table})
	}
	if err == nil {
		// Flushed: the copy is written without a log.
		k, v := b.Models.BriefMark(checkpoint)
		if err = db.Set(k, v, pebble.NoSync); err == nil {
			err = db.Flush()
		}
	}
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("projections: cannot write the brief copy: %w", err)
	}
	created := id.Created.UTC().Format(time.RFC3339Nano)
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(disk.Pack(fs, path, pw)) }()
	_, err = b.Store.PutBrief(ctx, checkpoint, pr, func(digest string) map[string]string {
		return map[string]string{FieldStream: id.Stream, FieldCreated: created, FieldSchema: strconv.FormatUint(id.Schema, 10),
			FieldProof: b.ProofOf(id.Stream, created, id.Schema, checkpoint, digest, true)}
	})
	pr.CloseWithError(err)
	return err
}

// withoutLog turns the write-ahead log of the read models in dir (a
// linked copy of a snapshot) into a table: a snapshot of the live read
// models holds what their memtable held as its log, uncompressed, up to
// the memtable's 16 MiB (7.1 of a 12 MiB snapshot of 200,000 events), and
// a start from it replays that log before it serves. Opening the copy
// replays it once here and writes it as a table.
//
// Then it compacts level 0 away (drainLevelZero). The live read models
// gather up to 16 tables there before compacting (projections'
// l0Compaction), each holding every node row written while it was the
// memtable, all but the newest of each superseded; a controller that
// started from such a snapshot compacted them first thing, in the seconds
// it was to be ready in (a fifth of a start's CPU at ten million events).
// Here it is done once a publish rather than once a start, and what was
// superseded is not fetched at all. The snapshot's other tables are hard
// links the live read models keep as they were (Pebble never writes a
// table twice); those the compaction replaces are unlinked from the copy
// only.
func (b Bus) withoutLog(ctx context.Context, dir string) error {
	o := b.Models.Options(false)
	// One table in level 0 is enough to compact it.
	o.L0CompactionThreshold = 1
	ended := make(chan struct{}, 1)
	o.EventListener = &pebble.EventListener{CompactionEnd: func(pebble.CompactionInfo) {
		select {
		case ended <- struct{}{}:
		default: // one pending wake is enough: the loop reads the levels
		}
	}}
	db, err := pebble.Open(dir, o)
	if err != nil {
		return fmt.Errorf("projections: cannot open the snapshot in %s: %w", dir, err)
	}
	err = drainLevelZero(ctx, db, ended)
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	return err
}

// drainLevelZero waits until db's level 0 is empty, woken by each
// compaction's end. Each second it looks too, and stops waiting when
// Pebble compacts nothing though level 0 is not empty (a table it will not
// compact, a disk that refuses the output): the snapshot is then published
// with what level 0 holds, sound and only larger, rather than a publish
// waiting for ever and holding back every one after it. Bounded by ctx
// too (the engine closing ends the publish), as every wait is (rule 26).
func drainLevelZero(ctx context.Context, db *pebble.DB, ended <-chan struct{}) error {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for m := db.Metrics(); m.Levels[0].TablesCount > 0; m = db.Metrics() {
		select {
		case <-ended:
		case <-tick.C:
			if db.Metrics().Compact.NumInProgress == 0 {
				return nil
			}
		case <-ctx.Done():
			return fmt.Errorf("projections: level 0 of the snapshot to publish was not compacted: %w", context.Cause(ctx))
		}
	}
	return nil
}

// identityOf reads the stream identity and schema of the read models in dir.
func (b Bus) identityOf(dir string) (Identity, error) {
	db, err := pebble.Open(dir, b.Models.Options(true))
	if err != nil {
		return Identity{}, fmt.Errorf("projections: cannot read the snapshot in %s: %w", dir, err)
	}
	defer db.Close()
	return b.Models.Identity(db)
}
