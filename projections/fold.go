package projections

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/meshctl/mesh/declaration"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/events/store"
	"github.com/meshctl/mesh/projections/admit"
	"github.com/meshctl/mesh/projections/moved"
	"github.com/meshctl/mesh/projections/pipeline"
)

// errPast ends a time-travel fold at the first event after its moment.
var errPast = errors.New("projections: the fold reached the moment asked for")

// FoldError stops a fold at the event it could not apply (the fold never
// skips an event); it is the pipeline's, which stops the read there.
type FoldError = pipeline.FoldError

// fold reads the stream from o.From into f through the decode pipeline and
// returns when the read has ended and everything it delivered is folded.
func (e *Engine) fold(ctx context.Context, o store.ReadOptions, f *folder) error {
	return pipeline.Run(ctx, f, f.keys, func(ctx context.Context, add func(store.Msg) error, flush func()) error {
		o.Idle = flush
		return e.o.Store.Read(ctx, o, add)
	})
}

// readModels are the folds every event passes through, in this order. A fold
// ignores the events that do not concern it.
var readModels = []func(*folder, events.Recorded) error{
	(*folder).foldNode, inBatch(foldCatalogue), inBatch(foldStandings), inBatch(foldCredentials), inBatch(foldRuntimes), inBatch(foldRollouts), inBatch(foldNetwork), inBatch(foldSeats), inBatch(foldLiveness), (*folder).foldHistory, (*folder).foldReportKeys, (*folder).foldNodeKeys, inBatch(foldTokens), inBatch(foldForeign), inBatch(foldFloods), inBatch(foldArtifacts), inBatch(foldOperators),
}

// inBatch is a fold that needs only the batch.
func inBatch(fold func(*pebble.Batch, events.Recorded) error) func(*folder, events.Recorded) error {
	return func(f *folder, rec events.Recorded) error { return fold(f.b, rec) }
}

// movesComposition is true of every event that can change what some node
// would be composed to, and of no other (reports, standings and sends do
// not), so a cache of would-send digests stays valid across the events that
// are most of a busy mesh's traffic. Each type's events.Right says which, for every
// event type.
func movesComposition(ev events.Event) bool {
	return events.MovesOf(ev.EventType())&events.MovesComposition != 0
}

// folder accumulates events into one indexed Pebble batch (indexed, so a fold
// can read rows written earlier in the same batch) and commits the batch with
// the checkpoint in it.
type folder struct {
	// asOf, when set, ends the fold before the first event that occurred
	// after it: time travel folds the past into a temporary store.
	asOf time.Time
	// latest is the latest moment of any event folded (unix nanoseconds),
	// kept in meta at every commit (keyLatest).
	latest int64
	db     *pebble.DB
	b      *pebble.Batch
	size   int // events per commit while catching up
	n      int // events in b
	last   uint64
	// composition is the newest event in b that moves the composition
	// version, 0 for none. It is written once, at commit, beside the
	// checkpoint: written per event it was half of all the keys a fold of
	// enrolments put into Pebble, each shadowing the one before.
	composition uint64
	// moves are b's events that moved composition, for the shared
	// memory's log of them (moved.Log) at commit: the live folder's only.
	moves    []moved.Move
	onCommit func(last uint64)
	// head, while an event is applied, is the head of the declaration it
	// sends as decoding read it (nil, or zero, when it did not).
	head *declaration.Head
	// snapshot, on the live folder, may keep a snapshot of what was just
	// committed: it knows exactly what that holds.
	snapshot func(db *pebble.DB, last uint64, latest int64)
	keys     *declaration.Keyring
	// rows and reportKeys remember the node rows (as committed, encoded)
	// and report keys this folder read or wrote: a report is checked
	// against its node's row and key, then folded into the row, and each
	// Get of an indexed batch costs microseconds (half a fold's time, read
	// twice). The folder is the read models' only writer, so what it
	// remembers stays true across commits; a discarded batch forgets it
	// all, and so does a memory grown past rememberRows. A row is kept in
	// its encoded form, a few hundred bytes, not decoded: decoded (a
	// struct, its send, its report, its digests in hex, a map of labels)
	// 100,000 rows were 110-150 MB of a controller's live heap, the
	// largest part of it (issue 34's 700 MiB bound). nodes are the rows
	// decoded since the last commit, which the commit encodes into rows.
	rows  map[string][]byte
	nodes map[string]Node
	// held are decoded rows kept past their commit while a report is
	// awaited: a node sent a declaration reports on it a moment later,
	// most often in another commit, and decoding its row again for that
	// was half of the fold's decoding in a push (issue 34 point 1). A
	// row leaves at the next event on its node (its report), and all at
	// once when rememberHeld are held (nodes that never report). A row
	// its report left is held again while fewer than rememberReported
	// are held, for the next push's send: decoding it was the other half.
	held       map[string]Node
	reportKeys map[string]string
	// owned remembers which nodes made their own keys (nil: none recorded).
	owned map[string]*NodeKeys
	// shapes remember what each build provides, consumes and requires,
	// by module and build (package admit).
	shapes admit.Shapes
	// dirty are the nodes whose rows changed since the last commit: a row
	// is encoded and written once a commit, however many events of the
	// batch changed it (a send and its report are two).
	dirty map[string]bool
	// written are a commit's encoded rows, reused commit after commit.
	written []encodedRow
	// mem guards rows where views read them (noderows.go): shared, on the
	// live folder, whose every change to rows is then made under mem.mu.
	mem    *nodeMemory
	shared bool
	// heard, on the live folder only, is told of each report (Options.Heard);
	// bytes is the size of the message being applied.
	heard func(Heard)
	bytes int
	// key and row are a history row's, reused event after event (the
	// batch copies what it is given).
	key, row []byte
	// window, on the live folder only, groups the commits of events that
	// trickle in (trickleWindow); 0 commits each time the reader catches
	// up. now is its clock, lastCommit when it last committed; wanted is
	// the lowest event a WaitFor waits for, which is committed at once.
	window     time.Duration
	now        func() time.Time
	lastCommit time.Time
	wanted     func() uint64
	wake       <-chan struct{} // a WaitFor began waiting (nil: never)
}

func (e *Engine) newFolder(db *pebble.DB, onCommit func(uint64)) *folder {
	f := &folder{db: db, b: db.NewIndexedBatch(), size: e.o.BatchSize, onCommit: onCommit, keys: e.o.Keys, latest: int64(readU64(db, keyLatest)),
		rows: map[string][]byte{}, nodes: map[string]Node{}, held: map[string]Node{}, reportKeys: map[string]string{}, owned: map[string]*NodeKeys{}, shapes: admit.Shapes{}, dirty: map[string]bool{}}
	f.mem = &nodeMemory{rows: f.rows}
	return f
}

// Apply folds one event the pipeline decoded; head is the head of the
// declaration it sends (history reads it), bytes its message's size.
func (f *folder) Apply(rec events.Recorded, head *declaration.Head, bytes int) error {
	f.head, f.bytes = head, bytes
	err := f.apply(rec)
	f.head = nil
	return err
}

// Holding, Last, Now and Wake tell the pipeline what it asks of the
// folder (pipeline.Folder).
func (f *folder) Holding() bool         { return f.n > 0 }
func (f *folder) Last() uint64          { return f.last }
func (f *folder) Now() time.Time        { return f.now() }
func (f *folder) Wake() <-chan struct{} { return f.wake }

// apply folds one decoded event into the batch, or sets it aside as
// foreign (rule 19): a foreign message changes no other read model.
func (f *folder) apply(rec events.Recorded) error {
	// A foreign message's own time is its writer's word: it is placed by
	// when the stream stored it, so it cannot end time travel early.
	at := rec.Envelope.OccurredAt
	if rec.Foreign != nil {
		at = rec.Stored
	}
	if !f.asOf.IsZero() && at.After(f.asOf) {
		return errPast
	}
	// The latest moment folded so far: a snapshot taken at this commit
	// answers time travel to any moment from it on, never to one before.
	if ns := at.UnixNano(); ns > f.latest {
		f.latest = ns
	}
	if rec.Foreign == nil {
		foreign, err := f.admit(rec)
		if err != nil {
			return &FoldError{Seq: rec.Seq, Subject: rec.Subject, Err: err}
		}
		rec.Foreign = foreign
	}
	if f.heard != nil {
		if rest, ok := strings.CutPrefix(rec.Subject, events.ReportPrefix+"."); ok {
			node, _, _ := strings.Cut(rest, ".")
			f.heard(Heard{Node: node, Bytes: f.bytes, Stored: rec.Stored, Foreign: rec.Foreign != nil})
		}
	}
	if rec.Foreign != nil {
		if err := putForeign(f.b, rec); err != nil {
			return &FoldError{Seq: rec.Seq, Subject: rec.Subject, Err: err}
		}
		if err := f.followVersion(rec); err != nil {
			return &FoldError{Seq: rec.Seq, Subject: rec.Subject, Err: err}
		}
		f.n++
		f.last = rec.Seq
		return nil
	}
	for _, fold := range readModels {
		if err := fold(f, rec); err != nil {
			return &FoldError{Seq: rec.Seq, Subject: rec.Subject, Err: err}
		}
	}
	if movesComposition(rec.Event) {
		f.composition = rec.Seq
		if f.shared { // what views ask of what moved (moved.Log)
			mv := moved.Move{Seq: rec.Seq}
			if typ := rec.Event.EventType(); moved.OneNode(typ) {
				mv.Node = events.Rights[typ].Name(rec.Event)
			}
			f.moves = append(f.moves, mv)
		}
	}
	f.n++
	f.last = rec.Seq
	return nil
}

// trickleWindow is the longest the live fold holds a caught-up commit back.
// With thousands of real agents each reporting over its own connection,
// events arrive one at a time about 0.3 ms apart and each was a commit of
// its own (a Pebble commit, a fresh indexed batch, the checkpoint and every
// dirty row written): the fold committed twice as much CPU as for the same
// reports arriving in bursts (issue 34). Within this window of the last
// commit the next is deferred, so a trickle commits some seven events at a
// time. Nothing that waits is held back by it: a WaitFor for an event
// folded is committed at once (wanted), so a command reads its own write
// as soon as before; only a reader that does not wait (status, a view)
// may see an event up to this much later, far inside what the read models
// may lag anyway (status tolerates 3 s).
const trickleWindow = 2 * time.Millisecond

// CommitIf commits when the batch is full, or when the reader has caught up
// (pending 0), so that a live event is readable at once: on the live
// folder, a caught-up commit that nobody waits for is deferred while the
// last commit is younger than the window, and due is when it must be
// made (zero when nothing is deferred). The pipeline commits it then, or
// earlier: a full batch, a waiter, the end of the read (fold's last commit).
func (f *folder) CommitIf(pending uint64) (due time.Time, err error) {
	if f.n >= f.size {
		return time.Time{}, f.Commit()
	}
	if pending > 0 || f.n == 0 {
		return time.Time{}, nil
	}
	if f.window > 0 && f.wanted() > f.last {
		if due := f.lastCommit.Add(f.window); f.now().Before(due) {
			return due, nil
		}
	}
	return time.Time{}, f.Commit()
}

// CommitWanted commits what is applied when a WaitFor waits for an event
// in it: a waiter is never held back by the window.
func (f *folder) CommitWanted() error {
	if f.n == 0 || f.wanted() > f.last {
		return nil
	}
	return f.Commit()
}

// Commit writes the batch and the checkpoint together. NoSync: a crash may
// lose the newest commits, but never splits rows from their checkpoint (one
// WAL record), and replay from the surviving checkpoint restores them.
func (f *folder) Commit() error {
	if f.n == 0 {
		return nil
	}
	// Encoded before the memory is locked: readers wait only for the map
	// to change, not for the rows to be encoded.
	written := f.written[:0]
	for name := range f.dirty {
		row, err := putNode(f.b, f.nodes[name])
		if err != nil {
			return err
		}
		written = append(written, encodedRow{name, row})
		// Its newest form replaces whatever was held of it.
		delete(f.held, name)
		switch n := f.nodes[name]; {
		case awaitsReport(n):
			if len(f.held) >= rememberHeld {
				clear(f.held)
			}
			f.held[name] = n
		case len(f.held) < rememberReported:
			f.held[name] = n
		}
	}
	clear(f.dirty)
	// Decoded rows are a batch's alone, but those held: the encoded ones
	// are remembered.
	clear(f.nodes)
	if err := f.b.Set(keyCheckpoint, u64(f.last), nil); err != nil {
		return err
	}
	if f.composition > 0 {
		if err := f.b.Set(keyComposition, u64(f.composition), nil); err != nil {
			return err
		}
	}
	if err := f.b.Set(keyLatest, u64(uint64(max(f.latest, 0))), nil); err != nil {
		return err
	}
	// A view that takes its snapshot from here until the memory holds
	// this commit's rows reads Pebble's (noderows.go). Not held across
	// the Pebble commit, which may stall: every read would stall with it.
	f.lock()
	f.mem.committing = true
	f.unlock()
	err := f.b.Commit(pebble.NoSync)
	f.lock()
	f.mem.committing = false
	if err != nil {
		f.mem.forget()
	} else {
		for _, w := range written {
			f.rows[w.name] = w.row
			f.mem.put(w.name, w.row)
		}
		f.mem.at = f.last
		if f.mem.moved != nil {
			f.mem.moved.Add(f.moves, f.last)
		}
	}
	f.unlock()
	f.moves = f.moves[:0]
	clear(written)
	f.written = written[:0]
	if err != nil {
		return fmt.Errorf("projections: cannot commit read models at event %d: %w", f.last, err)
	}
	f.b.Close()
	f.b = f.db.NewIndexedBatch()
	f.n, f.composition = 0, 0
	if f.window > 0 {
		f.lastCommit = f.now()
	}
	// Each memory is bounded on its own: bounded together, a fleet of
	// 100,000 (a row and a report key each) cleared both at every commit
	// and read every row from Pebble again (a third of a push's fold).
	if len(f.rows) > rememberRows {
		f.lock()
		clear(f.rows)
		f.mem.forget()
		f.mem.tried = true // a fill would only find it too large again
		f.unlock()
	}
	if len(f.reportKeys) > rememberRows {
		clear(f.reportKeys)
	}
	if len(f.owned) > rememberRows {
		clear(f.owned)
	}
	// The snapshot is taken before anyone hears of the commit: a waiter
	// woken by it finds the snapshot there.
	if f.snapshot != nil {
		f.snapshot(f.db, f.last, f.latest)
	}
	if f.onCommit != nil {
		f.onCommit(f.last)
	}
	// The live folder's memory holds every node row from its start
	// (fillAtStart) or, when that fill failed, its first commit on
	// (noderows.go). After the commit is heard of: a fill that
	// fails only leaves views reading Pebble, and must not fail a commit
	// made (the fold would fold its events again).
	if f.shared {
		f.fill()
	}
	return nil
}

// reset drops what is uncommitted and starts a fresh batch, to fold again
// from the checkpoint after a commit failed.
func (f *folder) reset() {
	f.discard()
	f.b = f.db.NewIndexedBatch()
}

// discard drops an uncommitted batch: what a crash between batches does.
func (f *folder) discard() {
	f.b.Close()
	f.n, f.composition, f.moves = 0, 0, f.moves[:0]
	f.lock()
	clear(f.rows)
	f.mem.forget()
	f.unlock()
	clear(f.nodes)
	clear(f.held)
	clear(f.reportKeys)
	clear(f.owned)
	clear(f.dirty)
}

// rememberRows bounds the rows (a few hundred bytes each) and the report
// keys a folder remembers: a fleet larger than this is read from Pebble
// more often. At 100,000 nodes they save a push's fold 2.4 CPU seconds of
// Pebble reads (mesh fleet --simulate).
const rememberRows = 1 << 17

// rememberHeld bounds the decoded rows held for a report (some 1 KB each):
// a push's windows in flight, not a fleet (decoded, 100,000 rows were
// 110-150 MB of the heap).
const rememberHeld = 1 << 14

// rememberReported bounds the rows held that await no report: half of
// rememberHeld, so that at any fleet size the rows in flight (a push's
// windows and the fold's lag, which the sends of a push to 100,000 nodes
// fill) still find room, and a push to a fleet of up to this many nodes
// decodes none of its rows (some 1 KB each decoded: 8 MB at 8,192). Past
// it, a push decodes each send's row as before.
const rememberReported = rememberHeld / 2

// awaitsReport: n was sent a declaration it has not reported on.
func awaitsReport(n Node) bool {
	return n.LastSent != nil && (n.LastReport == nil || n.LastReport.Digest != n.LastSent.Digest)
}

// node reads a node's row through the folder's memory of it: decoded once
// a batch, from the encoded row it remembers or else from Pebble.
func (f *folder) node(name string) (Node, bool, error) {
	if n, ok := f.nodes[name]; ok {
		return n, true, nil
	}
	if n, ok := f.held[name]; ok {
		delete(f.held, name)
		f.nodes[name] = n
		return n, true, nil
	}
	row, ok := f.rows[name]
	if !ok {
		var err error
		if row, ok, err = getRow(f.b, name); err != nil || !ok {
			return Node{}, false, err
		}
		f.lock()
		f.rows[name] = row
		f.unlock()
	}
	n, err := decodeNode(name, row)
	if err != nil {
		return Node{}, false, err
	}
	f.nodes[name] = n
	return n, true, nil
}

// encodedRow is a node's row as a commit encoded it.
type encodedRow struct {
	name string
	row  []byte
}

// lock and unlock guard a change to rows where views read them: only
// the live folder's memory is shared, and a folder that shares none (a
// rebuild's, a copy's) pays no lock.
func (f *folder) lock() {
	if f.shared {
		f.mem.mu.Lock()
	}
}

func (f *folder) unlock() {
	if f.shared {
		f.mem.mu.Unlock()
	}
}

// putNode changes a node's row; commit writes it. Until then only this
// folder reads it, through node.
func (f *folder) putNode(n Node) error {
	f.nodes[n.Name] = n
	f.dirty[n.Name] = true
	return nil
}

// DefaultBatchSize is how many events a commit holds while catching up. A
// node's row is written once a commit however many of its events the commit
// folds, so larger batches write less: at 20,000 a catch-up of a million
// real events wrote 315 MB into Pebble instead of 462. But with level 0
// compacted at 16 files that no longer bought time (ready in 12.7-14.4 s
// against 13.2-14.8 s at 2,000, within this box's noise), while a stream of
// enrolments folded 15% slower (108,000-110,000 events/s against 130,000 in
// BenchmarkFoldVsRawRead) and the peak RSS was 15 MiB higher. So 2,000.
const DefaultBatchSize = 2_000

// followVersion moves the version of the aggregate a foreign message's
// subject names, when the read models hold a row for it. The message
// changes nothing else, but it is on the aggregate's subjects, so the
// stream's last sequence for them (which the next append expects) moved:
// a row left behind would make every later write to that node, rollout,
// seat or pool conflict for good, and catching up would never mend it.
func (f *folder) followVersion(rec events.Recorded) error {
	s, err := events.ParseSubject(rec.Subject)
	if err != nil || s.Writer != events.ByController {
		return nil
	}
	id := s.Aggregate.ID
	switch s.Aggregate.Kind {
	case events.KindNode:
		return f.updateNode(id, func(n *Node) { n.Version = rec.Seq })
	case events.KindRollout:
		return bumpJSON(f.b, rolloutKey(id), func(r *Rollout) { r.Version = rec.Seq })
	case events.KindSeat:
		return bumpJSON(f.b, seatKey(id), func(r *Seat) { r.Version = rec.Seq })
	case events.KindNetwork:
		return bumpJSON(f.b, keyNetwork, func(r *Network) { r.Version = rec.Seq })
	case events.KindLiveness:
		return bumpLiveness(f.b, id, rec.Seq)
	case events.KindToken:
		return bumpJSON(f.b, tokenKey(id), func(t *Token) { t.Version = rec.Seq })
	case events.KindArtifact:
		return bumpJSON(f.b, artifactKey(id), func(r *ArtifactRow) { r.Version = rec.Seq })
	case events.KindOperator:
		return bumpJSON(f.b, operatorKey(id), func(o *Operator) { o.Version = rec.Seq })
	}
	return nil
}

// bumpJSON changes a JSON row in place, if there is one.
func bumpJSON[T any](b *pebble.Batch, key []byte, change func(*T)) error {
	var row T
	found, err := getJSON(b, key, &row)
	if err != nil || !found {
		return err
	}
	change(&row)
	return putJSON(b, key, row)
}
