package projections

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/meshctl/mesh/events/store"
	"github.com/meshctl/mesh/projections/disk"
)

// Published snapshots (issue 34): a controller with no read models of its
// own (a new machine, a restored home, a reset) starts from the newest
// snapshot of this mesh's read models on the bus and folds only the
// stream's tail. At a million events a fold from the first takes about 20
// CPU seconds; from a snapshot, the tail's share of that.
//
// A snapshot is believed only with its proof: the MAC, under the key the
// controller proves its events with (rule 19), of the stream it was folded
// from, the schema, the sequence it holds and the digest of its exact
// bytes, which the object store checks as they are read back. Whoever can
// write the bucket without the controller's key (a bus account, a mistake)
// cannot make a controller serve read models the log does not hold; such a
// snapshot is passed over, said, and the fold starts from the first event.
// `projections verify` then proves the read models it led to equal a fold
// from the start, as for any others.

// DefaultPublishEvery is how many events apart a controller publishes a
// snapshot to the bus: a start from one then folds at most this many (and
// the SnapshotEvery between time-travel snapshots), at about 28 CPU µs an
// event on this box's two cores, on top of fetching and opening the
// snapshot (3 to 4 CPU s at ten million events). At 200,000 the tail alone
// cost a start some 6.3 CPU s at worst, over its bound of 5 s; at 100,000
// it is some 3.5. What it costs: the bucket is rewritten each time, a
// snapshot of 391 MiB at ten million events written again for every
// 100,000 events (some 80 MiB of log), and the publisher packs and sends
// it beside the fold (docs/performance.md, "A start from a snapshot on the
// bus").
const DefaultPublishEvery = 100_000

// DefaultPublishAfter bounds the tail by time too: a mesh folding a few
// events a minute would take hours to reach PublishEvery, and a start
// would fold all of them. Once this long has passed since the last
// publish, the next commit of anything new is published (at ten million
// events a snapshot is some hundreds of MiB, so not much more often).
const DefaultPublishAfter = 5 * time.Minute

// The fields recorded beside a published snapshot.
const (
	fieldStream  = "stream"
	fieldCreated = "created"
	fieldSchema  = "schema"
	fieldProof   = "proof"
)

// proof is the MAC that makes a snapshot the controller's.
func (e *Engine) proof(stream, created string, schema, checkpoint uint64, digest string) string {
	m := hmac.New(sha256.New, e.o.Keys.LogMAC())
	// A prefix no event's MAC'd bytes begin with (they are subjects and
	// JSON), so this MAC can never pass for one.
	fmt.Fprintf(m, "mesh read-model snapshot\x00%s\x00%s\x00%d\x00%d\x00%s", stream, created, schema, checkpoint, digest)
	return hex.EncodeToString(m.Sum(nil))
}

// Publish puts the newest local snapshot of the read models (the ones
// time travel starts from) on the bus, with its proof. Nothing to publish
// (no local snapshot yet) is said as an error, and so is one no newer than
// the newest already published.
func (e *Engine) Publish(ctx context.Context) (store.Snapshot, error) {
	snaps := e.dir().Snapshots()
	if len(snaps) == 0 {
		return store.Snapshot{}, errors.New("projections: no snapshot of the read models is kept yet to publish")
	}
	newest := snaps[len(snaps)-1]
	// A linked copy: the fold thins its snapshots while this one is read.
	dir, err := e.dir().LinkSnapshot(newest)
	if err != nil {
		return store.Snapshot{}, err
	}
	defer e.fs.RemoveAll(dir)
	src := e.fs.PathJoin(dir, disk.GenerationName(1))
	if err := e.withoutLog(ctx, src); err != nil {
		return store.Snapshot{}, err
	}
	id, schema, err := e.identityOf(src)
	if err != nil {
		return store.Snapshot{}, err
	}
	created := id.Created.UTC().Format(time.RFC3339Nano)
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(disk.Pack(e.fs, src, pw)) }()
	sn, err := e.o.Store.PutSnapshot(ctx, newest.Checkpoint, pr, func(digest string) map[string]string {
		return map[string]string{fieldStream: id.Stream, fieldCreated: created, fieldSchema: strconv.FormatUint(schema, 10),
			fieldProof: e.proof(id.Stream, created, schema, newest.Checkpoint, digest)}
	})
	pr.CloseWithError(err) // the packer stops if the store did
	if err == nil {
		e.lastPublished.Store(sn.Checkpoint)
	}
	return sn, err
}

// withoutLog turns the write-ahead log of the read models in dir (a
// linked copy of a snapshot) into a table: a snapshot of the live read
// models holds what their memtable held as its log, uncompressed, up to
// the memtable's 16 MiB (7.1 of a 12 MiB snapshot of 200,000 events), and
// a start from it replays that log before it serves. Opening the copy
// replays it once here and writes it as a table.
//
// Then it compacts level 0 away (drainLevelZero). The live read models
// gather up to 16 tables there before compacting (l0Compaction), each
// holding every node row written while it was the memtable, all but the
// newest of each superseded; a controller that started from such a
// snapshot compacted them first thing, in the seconds it was to be ready
// in (a fifth of a start's CPU at ten million events). Here it is done
// once a publish rather than once a start, and what was superseded is not
// fetched at all. The snapshot's other tables are hard links the live read
// models keep as they were (Pebble never writes a table twice); those the
// compaction replaces are unlinked from the copy only.
func (e *Engine) withoutLog(ctx context.Context, dir string) error {
	o := e.pebbleOptions(true)
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
func (e *Engine) identityOf(dir string) (identity, uint64, error) {
	db, err := pebble.Open(dir, &pebble.Options{FS: e.fs, ReadOnly: true, Logger: pebbleLogger{e.o.Log}})
	if err != nil {
		return identity{}, 0, fmt.Errorf("projections: cannot read the snapshot in %s: %w", dir, err)
	}
	defer db.Close()
	var id identity
	if _, err := getJSON(db, keyIdentity, &id); err != nil {
		return identity{}, 0, err
	}
	return id, readU64(db, keySchema), nil
}

// publishLate says the fold, having just committed up to last, should
// publish now for the time since the last publish (PublishAfter).
func (e *Engine) publishLate(last uint64) bool {
	return e.o.PublishEvery > 0 && e.o.PublishAfter > 0 && last > e.lastPublished.Load() && !e.publishing.Load() &&
		e.now().Sub(time.Unix(0, e.publishedAt.Load())) >= e.o.PublishAfter
}

// maybePublish publishes, beside the fold, once PublishEvery events were
// folded since the newest snapshot on the bus, or when late (publishLate);
// one publish at a time.
func (e *Engine) maybePublish(last uint64, late bool) {
	if e.o.PublishEvery == 0 || !late && last < e.lastPublished.Load()+e.o.PublishEvery || !e.publishing.CompareAndSwap(false, true) {
		return
	}
	// Counted from the start of a publish: one that takes long does not
	// make the next one due at once.
	e.publishedAt.Store(e.now().UnixNano())
	e.publishes.Add(1)
	go func() {
		defer e.publishes.Done()
		defer e.publishing.Store(false)
		start := time.Now()
		sn, err := e.Publish(e.closing)
		if err != nil {
			e.o.Log.Warn("cannot publish a snapshot of the read models (a new controller folds from further back)", "err", err)
			return
		}
		e.o.Log.Info("published a snapshot of the read models", "event", sn.Checkpoint, "bytes", sn.Size, "took", time.Since(start).Round(time.Millisecond))
	}()
}

// errStale is a snapshot that is sound but not of these read models: of
// another schema (a binary upgraded since), another stream (a restore),
// or ahead of the stream. Nothing is wrong; the next publish replaces it.
var errStale = errors.New("it is not of these read models")

// usable says why a published snapshot may not start read models of the
// stream st, or nil when it may.
func (e *Engine) usable(sn store.Snapshot, st store.State) error {
	created := st.Created.UTC().Format(time.RFC3339Nano)
	switch {
	case sn.Uint(fieldSchema) != schemaVersion:
		return fmt.Errorf("%w: it has schema %s, this binary folds %d", errStale, sn.Fields[fieldSchema], schemaVersion)
	case sn.Fields[fieldStream] != st.Stream || sn.Fields[fieldCreated] != created:
		return fmt.Errorf("%w: it was folded from stream %s created %s, the bus has %s created %s", errStale, sn.Fields[fieldStream], sn.Fields[fieldCreated], st.Stream, created)
	case sn.Checkpoint > st.LastSeq:
		return fmt.Errorf("%w: it holds event %d, the stream ends at %d", errStale, sn.Checkpoint, st.LastSeq)
	case !hmac.Equal([]byte(sn.Fields[fieldProof]), []byte(e.proof(st.Stream, created, schemaVersion, sn.Checkpoint, sn.Digest))):
		return errors.New("its proof is not this controller key's MAC of it")
	}
	return nil
}

// fromPublished fills the generation directory gen with the newest usable
// snapshot on the bus and answers the event it holds; 0 when none was
// usable, each one passed over said in the log with why.
func (e *Engine) fromPublished(ctx context.Context, gen string, st store.State) uint64 {
	all, err := e.o.Store.Snapshots(ctx)
	if err != nil {
		e.o.Log.Warn("cannot list the snapshots on the bus; folding from the first event", "err", err)
		return 0
	}
	path := e.fs.PathJoin(e.o.Dir, gen)
	for i := len(all) - 1; i >= 0; i-- {
		sn := all[i]
		if err := e.usable(sn, st); err != nil {
			e.o.Log.Warn("a snapshot on the bus is passed over: "+err.Error(), "snapshot", sn.Name)
			continue
		}
		start := time.Now()
		if err := e.fetch(ctx, sn, path); err != nil {
			e.fs.RemoveAll(path)
			e.o.Log.Warn("a snapshot on the bus is passed over: "+err.Error(), "snapshot", sn.Name)
			continue
		}
		// The fetch grows with the read models (their history index is a
		// row an event), the tail with --publish-snapshot-every: said
		// apart, a slow start names its cause.
		e.o.Log.Info("projections: starting from the snapshot on the bus", "snapshot", sn.Name, "event", sn.Checkpoint, "bytes", sn.Size,
			"fetched_in", time.Since(start).Round(time.Millisecond))
		return sn.Checkpoint
	}
	return 0
}

// fetch unpacks sn into path, whole and matching its digest or not at all.
func (e *Engine) fetch(ctx context.Context, sn store.Snapshot, path string) error {
	r, err := e.o.Store.OpenSnapshot(ctx, sn)
	if err != nil {
		return err
	}
	defer r.Close()
	if err := disk.Unpack(e.fs, r, path); err != nil {
		return fmt.Errorf("cannot read it whole: %w", err)
	}
	return nil
}

// PublishedCheck is what verify found of the newest snapshot on the bus.
type PublishedCheck struct {
	Snapshot store.Snapshot
	// Stale: Refused says why it is not of these read models (schema,
	// stream), which is no fault.
	Stale bool
	// Why it may not be used (its proof, its stream, its bytes), or how
	// its read models differ from a fold from the first event up to the
	// event it holds; both empty when it equals that fold.
	Refused, Diff string
}

// VerifyPublished holds the newest snapshot on the bus to what a controller
// starting from it relies on: its proof, its exact bytes (their digest),
// and read models equal to a fold of the stream from its first event up
// to the event it holds. found is false when there is none.
func (e *Engine) VerifyPublished(ctx context.Context) (PublishedCheck, bool, error) {
	ctx, done := e.long(ctx)
	defer done()
	all, err := e.o.Store.Snapshots(ctx)
	if err != nil || len(all) == 0 {
		return PublishedCheck{}, false, err
	}
	c := PublishedCheck{Snapshot: all[len(all)-1]}
	st, err := e.o.Store.State(ctx)
	if err != nil {
		return c, true, err
	}
	if err := e.usable(c.Snapshot, st); err != nil {
		c.Refused, c.Stale = err.Error(), errors.Is(err, errStale)
		return c, true, nil
	}
	dir := e.o.Dir + ".verify-published"
	if err := e.fs.RemoveAll(dir); err != nil {
		return c, true, fmt.Errorf("projections: cannot clear %s: %w", dir, err)
	}
	defer e.fs.RemoveAll(dir)
	path := e.fs.PathJoin(dir, "snapshot")
	if err := e.fetch(ctx, c.Snapshot, path); err != nil {
		c.Refused = err.Error()
		return c, true, nil
	}
	db, err := pebble.Open(path, &pebble.Options{FS: e.fs, ReadOnly: true, Logger: pebbleLogger{e.o.Log}})
	if err != nil {
		c.Refused = fmt.Sprintf("it does not open as read models: %v", err)
		return c, true, nil
	}
	defer db.Close()
	if held := readCheckpoint(db); held != c.Snapshot.Checkpoint {
		c.Refused = fmt.Sprintf("it is named for event %d and holds read models folded up to %d", c.Snapshot.Checkpoint, held)
		return c, true, nil
	}
	c.Diff, _, err = e.foldAndCompare(ctx, db, c.Snapshot.Checkpoint, e.fs.PathJoin(dir, "fold"), nil)
	return c, true, err
}
