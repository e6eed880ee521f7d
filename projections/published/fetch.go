package published

import (
	"bytes"
	"context"
	"crypto/hmac"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/meshctl/mesh/events/store"
	"github.com/meshctl/mesh/projections/disk"
)

// errStale is a snapshot that is sound but not of these read models: of
// another schema (a binary upgraded since), another stream (a restore),
// or ahead of the stream. Nothing is wrong; the next publish replaces it.
var errStale = errors.New("it is not of these read models")

// digestShape is a SHA-256 digest as the object store writes it.
var digestShape = regexp.MustCompile(`^SHA-256=[A-Za-z0-9_-]{43}=?$`)

// usable says why a published snapshot may not start read models of the
// stream st, or nil when it may.
func (b Bus) usable(sn store.Snapshot, st store.State) error { return b.usableAs(sn, st, false) }

func (b Bus) usableAs(sn store.Snapshot, st store.State, brief bool) error {
	created := st.Created.UTC().Format(time.RFC3339Nano)
	switch {
	case sn.Uint(FieldSchema) != b.Schema:
		return fmt.Errorf("%w: it has schema %s, this binary folds %d", errStale, sn.Fields[FieldSchema], b.Schema)
	case sn.Fields[FieldStream] != st.Stream || sn.Fields[FieldCreated] != created:
		return fmt.Errorf("%w: it was folded from stream %s created %s, the bus has %s created %s", errStale, sn.Fields[FieldStream], sn.Fields[FieldCreated], st.Stream, created)
	case sn.Checkpoint > st.LastSeq:
		return fmt.Errorf("%w: it holds event %d, the stream ends at %d", errStale, sn.Checkpoint, st.LastSeq)
	case !digestShape.MatchString(sn.Digest):
		// The object store checks the bytes against the digest only by
		// what follows its "=", whatever name comes before.
		return fmt.Errorf("its digest %q is not a SHA-256 one", sn.Digest)
	case !hmac.Equal([]byte(sn.Fields[FieldProof]), []byte(b.ProofOf(st.Stream, created, b.Schema, sn.Checkpoint, sn.Digest, brief))):
		return errors.New("its proof is not this controller key's MAC of it")
	}
	return nil
}

// Newest fills the directory path (a generation's, not yet made) with the
// newest usable snapshot on the bus and answers the event it holds; 0
// when none was usable, each one passed over said in the log with why.
//
// A brief one (without the history index, which FillHistory brings once
// the read models serve) is taken before any whole one, provided a usable
// whole one holds at least its events to fill the history from: a tenth
// of the bytes to fetch before serving. A brief one is published just
// after its whole one, so the newest brief may be one publish older than
// the newest whole (a publish under way, or cut): its tail is then longer
// by that much.
func (b Bus) Newest(ctx context.Context, path string, st store.State) uint64 {
	all, err := b.Store.Snapshots(ctx)
	if err != nil {
		b.Log.Warn("cannot list the snapshots on the bus; folding from the first event", "err", err)
		return 0
	}
	var wholes []store.Snapshot
	for _, sn := range all {
		if err := b.usable(sn, st); err != nil {
			b.Log.Warn("a snapshot on the bus is passed over: "+err.Error(), "snapshot", sn.Name)
			continue
		}
		wholes = append(wholes, sn)
	}
	if len(wholes) == 0 {
		return 0
	}
	briefs, err := b.Store.Briefs(ctx)
	if err != nil {
		b.Log.Warn("cannot list the brief snapshots on the bus; fetching a whole one", "err", err)
	}
	try := func(sn store.Snapshot, brief bool) bool {
		start := time.Now()
		err := b.usableAs(sn, st, brief)
		if err == nil {
			err = b.Fetch(ctx, sn, path)
		}
		if err == nil && brief {
			err = b.briefMarked(path, sn)
		}
		if err != nil {
			b.Dir.FS.RemoveAll(path)
			b.Log.Warn("a snapshot on the bus is passed over: "+err.Error(), "snapshot", sn.Name)
			return false
		}
		// The fetch grows with the read models, the tail with
		// --publish-snapshot-every: said apart, a slow start names its
		// cause.
		b.Log.Info("projections: starting from the snapshot on the bus", "snapshot", sn.Name, "brief", brief, "event", sn.Checkpoint,
			"bytes", sn.Size, "fetched_in", time.Since(start).Round(time.Millisecond))
		return true
	}
	// A brief one of the newest whole one or the one before (the bucket
	// keeps two): a brief one left older (its publishes failing) would
	// make the tail as long as it is old.
	oldest, newest := wholes[max(0, len(wholes)-2)].Checkpoint, wholes[len(wholes)-1].Checkpoint
	for i := len(briefs) - 1; i >= 0; i-- {
		if br := briefs[i]; br.Checkpoint >= oldest && br.Checkpoint <= newest && try(br, true) {
			return br.Checkpoint
		}
	}
	for i := len(wholes) - 1; i >= 0; i-- {
		if try(wholes[i], false) {
			return wholes[i].Checkpoint
		}
	}
	return 0
}

// Fetch unpacks sn into path, whole and matching its digest or not at all.
func (b Bus) Fetch(ctx context.Context, sn store.Snapshot, path string) error {
	r, err := b.Store.OpenSnapshot(ctx, sn)
	if err != nil {
		return err
	}
	defer r.Close()
	if err := disk.Unpack(b.Dir.FS, r, path); err != nil {
		return fmt.Errorf("cannot read it whole: %w", err)
	}
	return nil
}

// Check is what verify found of the newest snapshot on the bus.
type Check struct {
	Snapshot store.Snapshot
	// Stale: Refused says why it is not of these read models (schema,
	// stream), which is no fault.
	Stale bool
	// Why it may not be used (its proof, its stream, its bytes), or how
	// its read models differ from a fold from the first event up to the
	// event it holds; both empty when it equals that fold.
	Refused, Diff string
}

// Verify holds the newest snapshot on the bus to what a controller
// starting from it relies on: its proof, its exact bytes (their digest),
// and read models equal to a fold of the stream from its first event up
// to the event it holds (Models.Compare). found is false when there is
// none. The caller holds off whatever else folds beside the read models.
func (b Bus) Verify(ctx context.Context) (Check, bool, error) {
	all, err := b.Store.Snapshots(ctx)
	if err != nil || len(all) == 0 {
		return Check{}, false, err
	}
	c := Check{Snapshot: all[len(all)-1]}
	st, err := b.Store.State(ctx)
	if err != nil {
		return c, true, err
	}
	if err := b.usable(c.Snapshot, st); err != nil {
		c.Refused, c.Stale = err.Error(), errors.Is(err, errStale)
		return c, true, nil
	}
	fs := b.Dir.FS
	dir := b.Dir.Path + ".verify-published"
	if err := fs.RemoveAll(dir); err != nil {
		return c, true, fmt.Errorf("projections: cannot clear %s: %w", dir, err)
	}
	defer fs.RemoveAll(dir)
	path := fs.PathJoin(dir, "snapshot")
	if err := b.Fetch(ctx, c.Snapshot, path); err != nil {
		c.Refused = err.Error()
		return c, true, nil
	}
	db, err := b.openFetched(path, c.Snapshot)
	if err != nil {
		c.Refused = err.Error()
		return c, true, nil
	}
	defer db.Close()
	c.Diff, err = b.Models.Compare(ctx, db, c.Snapshot.Checkpoint, fs.PathJoin(dir, "fold"))
	if err != nil || c.Diff != "" {
		return c, true, err
	}
	// Its brief copy, which a start serves from first, must be the same
	// read models but for the history index.
	c.Diff, err = b.verifyBrief(ctx, st, db, fs.PathJoin(dir, "brief"))
	return c, true, err
}

// openFetched opens the read models of sn fetched into path, read only,
// holding them to the event sn is named for; the error is the sentence
// for a person.
func (b Bus) openFetched(path string, sn store.Snapshot) (*pebble.DB, error) {
	db, err := pebble.Open(path, b.Models.Options(true))
	if err != nil {
		return nil, fmt.Errorf("it does not open as read models: %w", err)
	}
	if held := b.Models.Checkpoint(db); held != sn.Checkpoint {
		db.Close()
		return nil, fmt.Errorf("it is named for event %d and holds read models folded up to %d", sn.Checkpoint, held)
	}
	return db, nil
}

// briefMarked says why the brief snapshot br fetched into path may not
// start read models (it does not open, or lacks the mark), or nil.
func (b Bus) briefMarked(path string, br store.Snapshot) error {
	db, err := b.openFetched(path, br)
	if err != nil {
		return err
	}
	defer db.Close()
	return b.marked(db, br.Checkpoint)
}

// marked says why the brief read models r lack the mark that their
// history index is to follow from checkpoint, or nil when they have it:
// without it they would serve history silently missing every event they
// hold.
func (b Bus) marked(r pebble.Reader, checkpoint uint64) error {
	k, want := b.Models.BriefMark(checkpoint)
	v, closer, err := r.Get(k)
	if err != nil {
		return fmt.Errorf("it does not say its history index is to follow: %w", err)
	}
	defer closer.Close()
	if !bytes.Equal(v, want) {
		return fmt.Errorf("it says its history index follows from %x, not from event %d", v, checkpoint)
	}
	return nil
}

// verifyBrief holds the brief snapshot of whole's moment, if any, to its
// proof, its bytes and whole's rows outside the history index; "" when it
// holds (or there is none).
func (b Bus) verifyBrief(ctx context.Context, st store.State, whole pebble.Reader, path string) (string, error) {
	briefs, err := b.Store.Briefs(ctx)
	if err != nil {
		return "", err
	}
	at := b.Models.Checkpoint(whole)
	for _, br := range briefs {
		if br.Checkpoint != at {
			continue
		}
		if err := b.usableAs(br, st, true); err != nil {
			return fmt.Sprintf("its brief copy %s (without the history index) may not be used: %v", br.Name, err), nil
		}
		if err := b.Fetch(ctx, br, path); err != nil {
			return fmt.Sprintf("its brief copy %s: %v", br.Name, err), nil
		}
		db, err := b.openFetched(path, br)
		if err == nil {
			defer db.Close()
			err = b.marked(db, br.Checkpoint)
		}
		if err != nil {
			return fmt.Sprintf("its brief copy %s: %v", br.Name, err), nil
		}
		diff, err := b.Models.SameBrief(db, whole)
		if diff != "" {
			diff = fmt.Sprintf("its brief copy %s differs from it outside the history index:\n%s", br.Name, diff)
		}
		return diff, err
	}
	return "", nil
}
