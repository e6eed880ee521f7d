package projections

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/meshctl/mesh/declaration"
	"github.com/meshctl/mesh/events/store"
	"github.com/meshctl/mesh/projections/disk"
	"github.com/meshctl/mesh/projections/published"
	"github.com/meshctl/mesh/projections/scan"
)

// Sentinels for read models that do not belong to the stream they are opened on.
var (
	ErrForeignStream = errors.New("projections: the read models were folded from another stream")
	ErrRewound       = errors.New("projections: the read models are ahead of the stream")
	ErrSchema        = errors.New("projections: the read models have another schema")
)

// Options configure an Engine.
type Options struct {
	Dir   string // holds CURRENT and one directory per generation of read models
	FS    vfs.FS // nil: the OS file system
	Store *store.Store
	Log   *slog.Logger
	// BatchSize is how many events one commit holds while catching up
	// (DefaultBatchSize when 0).
	BatchSize int
	// Reset discards every generation before opening, so the read models are
	// folded again from the stream: the remedy for read models that do not
	// belong to it. The stream is untouched.
	Reset bool
	// Keys are the keys derived from the controller's, with which the fold
	// tells a rightful writer's event from a foreign message (rule 19).
	// Required: without them nothing could be believed.
	Keys *declaration.Keyring
	// SnapshotEvery, when set, keeps a snapshot of the read models every
	// so many events folded, from which time travel starts (snapshots.go; disk keeps them).
	SnapshotEvery uint64
	// PublishEvery, when set, publishes the newest snapshot to the bus
	// every so many events folded (package published), for a controller with
	// no read models to start from.
	PublishEvery uint64
	// PublishAfter, with PublishEvery, publishes anything folded since the
	// last publish once this long has passed since it (published.DefaultAfter).
	PublishAfter time.Duration
	// FromPublished: read models made fresh here start from the newest
	// snapshot on the bus whose proof holds, rather than from nothing.
	FromPublished bool
	// Brief opens read models for one answer (a snapshot and a short fold,
	// for time travel) with Pebble's default memtable (4 MiB) rather than
	// the live models' 16 MiB: twenty as-of statuses at a million events
	// left the controller at 178-279 MiB (memory the C allocator keeps
	// after each copy closes) and now at 118-162 MiB, in the same time
	// (0.4-0.7 s each on this noisy box, both ways). The block cache stays:
	// with Pebble's 8 MiB one they took 0.6-0.7 s.
	Brief bool
	// Cache is the block cache to share with the engine that opens this
	// one (a time-travel copy, a verify's fold): nil, Open makes one
	// (disk.NewCache). Every Pebble the engine opens shares it. Open takes
	// a reference of its own, given back at Close; the caller keeps its
	// own, and must hold it until Open returns (Engine.openChild), since
	// a cache whose last reference went is freed.
	Cache *pebble.Cache
	// Heard, when set, is told of every report the live fold reads (issue
	// 29), on the folding goroutine, so it must not wait: it is how the
	// controller notices a node flooding its report subjects at no cost
	// beyond the fold's own read. A rebuild, verify or time travel tells it
	// nothing.
	Heard func(Heard)
}

// Heard is a report as the live fold read it: whose subject it is on, its
// size, when the stream stored it, and whether it was set aside as foreign.
type Heard struct {
	Node    string
	Bytes   int
	Stored  time.Time
	Foreign bool
}

// Opening says what the read models held when opened.
type Opening struct {
	Generation string
	Fresh      bool
	Checkpoint uint64
	Stream     store.State
	Nodes      int
	// FromSnapshot is the event the snapshot on the bus the read models
	// started from holds (0: they did not start from one).
	FromSnapshot uint64
	// HistoryFrom: the history index lacks events up to it (0: whole); Start fills them in.
	HistoryFrom uint64
}

// Engine folds the stream into Pebble and serves reads of the result.
type Engine struct {
	o  Options
	fs vfs.FS

	mu  sync.RWMutex // held for writing only to swap db in a rebuild
	db  *pebble.DB
	gen string
	// sharedGen is the generation the live fold last shared its memory
	// of (share): its log of moves reaches back past its start only
	// within one generation (runMu guards it).
	sharedGen string
	// cache is every generation's block cache (Options.Cache), one
	// reference of it the engine's until Close.
	cache *pebble.Cache

	checkpoint atomic.Uint64
	// commits counts the live fold's commits: how well they are grouped
	// when events trickle in (BenchmarkTrickleFold).
	commits atomic.Uint64
	failure atomic.Pointer[FoldError]
	// stalled is a storage fault the fold is retrying (nil when none):
	// status names it while it lasts.
	stalled  atomic.Pointer[FoldError]
	unsynced atomic.Bool // commits since the last WAL sync

	notifyMu sync.Mutex
	notify   chan struct{} // closed and replaced on every commit
	// wanted is the lowest event a WaitFor has waited for since the last
	// commit (math.MaxUint64: none), set and cleared under notifyMu; wake
	// tells the live fold a waiter came, so that it commits at once what
	// it deferred (trickleWindow) if the waiter's event is in it.
	wanted atomic.Uint64
	wake   chan struct{}
	// asked is poked by WaitFor as wake is, for the live fold's reader:
	// the one thing that tells it someone waits for an event its
	// consumer will not deliver (events/store/own.go).
	asked chan struct{}
	// window and now are the live fold's (trickleWindow, time.Now): a
	// test freezes the clock, to defer every commit or none.
	window time.Duration
	now    func() time.Time

	// longMu: one long fold at a time, a rebuild or a verify. A verify
	// holds a snapshot of the live generation, which a rebuild's swap
	// would close under it.
	longMu sync.Mutex
	// lastSnap is the checkpoint of the last snapshot for time travel.
	// dropDir: this is a copy for time travel, whose directory goes when
	// it closes.
	lastSnap atomic.Uint64
	dropDir  bool
	// publisher is when the live fold publishes a snapshot to the bus,
	// and the publish under way (package published).
	publisher published.Schedule
	// warm: the read models came from a snapshot on the bus, and the
	// first start fills the fold's memory of node rows (warm.go).
	warm atomic.Bool
	// filling: fillHistory was started, or the history index was whole
	// when the engine opened.
	filling   atomic.Bool
	fills     sync.WaitGroup
	tailEnd   uint64        // the stream's last event when the engine opened
	fillEvery time.Duration // between fillHistory's tries: a minute, a test's less

	// memory is the live folder's memory of node rows, which views read
	// rather than Pebble's rows while it is of their moment (noderows.go).
	memory atomic.Pointer[nodeMemory]

	// closing ends a long fold when the engine closes (closed cancels it).
	closing context.Context
	closed  context.CancelFunc

	runMu     sync.Mutex // orders start/stop of the follower and rebuilds
	runCancel context.CancelFunc
	runDone   chan struct{}
}

type identity struct {
	Stream  string    `json:"stream"`
	Created time.Time `json:"created"`
}

// Open opens (or creates) the current generation of read models and checks
// that they belong to the store's stream. It does not start folding: Start does.
func Open(ctx context.Context, o Options) (*Engine, Opening, error) {
	cache := o.Cache
	if cache == nil {
		cache = disk.NewCache()
	} else {
		cache.Ref()
	}
	e, opening, err := open(ctx, o, cache)
	if err != nil {
		// No engine to give it back at Close: a controller that failed to
		// open and tried again would hold a cache a try.
		cache.Unref()
	}
	return e, opening, err
}

func open(ctx context.Context, o Options, cache *pebble.Cache) (*Engine, Opening, error) {
	if o.FS == nil {
		o.FS = vfs.Default
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.BatchSize <= 0 {
		o.BatchSize = DefaultBatchSize
	}
	if o.Keys == nil {
		return nil, Opening{}, errors.New("projections: no keys to check the stream's messages with; the controller's key is needed to fold")
	}
	e := &Engine{o: o, fs: o.FS, cache: cache, notify: make(chan struct{}), wake: make(chan struct{}, 1), asked: make(chan struct{}, 1), window: trickleWindow, now: time.Now}
	e.wanted.Store(math.MaxUint64)
	e.closing, e.closed = context.WithCancel(context.Background())
	if o.Reset {
		if err := o.FS.RemoveAll(o.Dir); err != nil {
			return nil, Opening{}, fmt.Errorf("projections: cannot discard %s: %w", o.Dir, err)
		}
	}
	if err := e.dir().Create(); err != nil {
		return nil, Opening{}, err
	}
	gen, err := e.dir().Current()
	if err != nil {
		return nil, Opening{}, err
	}
	fresh := gen == ""
	if fresh {
		// A generation CURRENT does not name is a crash's leftover (a
		// snapshot fetched and not yet named): never opened as it is.
		gen = disk.GenerationName(1)
		if err := o.FS.RemoveAll(o.FS.PathJoin(o.Dir, gen)); err != nil {
			return nil, Opening{}, fmt.Errorf("projections: cannot clear %s: %w", gen, err)
		}
	}
	st, err := o.Store.State(ctx)
	if err != nil {
		return nil, Opening{}, err
	}
	var from uint64
	if fresh && o.FromPublished {
		from = e.fromPublished(ctx, gen, st)
	}
	db, err := e.openGeneration(gen, st)
	if err != nil && from > 0 {
		// A snapshot whose proof held yet that does not open as read
		// models of this stream is passed over like any other.
		o.Log.Warn("the snapshot on the bus does not open as read models of this stream; folding from the first event", "err", err)
		if err := o.FS.RemoveAll(o.FS.PathJoin(o.Dir, gen)); err != nil {
			return nil, Opening{}, err
		}
		from = 0
		db, err = e.openGeneration(gen, st)
	}
	if errors.Is(err, ErrSchema) {
		// Read models of another schema are only an older or newer way of
		// folding the same stream: fold them again, no person needed.
		o.Log.Info(err.Error() + "; folding them again from the stream")
		if err := o.FS.RemoveAll(o.Dir); err != nil {
			return nil, Opening{}, fmt.Errorf("projections: cannot discard %s: %w", o.Dir, err)
		}
		if err := e.dir().Create(); err != nil {
			return nil, Opening{}, err
		}
		fresh, gen = true, disk.GenerationName(1)
		if o.FromPublished {
			from = e.fromPublished(ctx, gen, st)
		}
		db, err = e.openGeneration(gen, st)
	}
	if err != nil {
		return nil, Opening{}, err
	}
	if fresh {
		if err := e.dir().SetCurrent(gen); err != nil {
			db.Close()
			return nil, Opening{}, err
		}
	}
	e.db, e.gen = db, gen
	e.checkpoint.Store(readCheckpoint(db))
	e.warm.Store(from > 0)
	historyFrom := readU64(db, keyHistoryFrom)
	e.tailEnd, e.fillEvery = st.LastSeq, time.Minute
	e.filling.Store(historyFrom == 0)
	e.dir().ClearLeftovers()
	e.fs.RemoveAll(o.Dir + ".history") // a fill's fetch a crash left (published.Bus.FillHistory)
	if s := e.dir().Snapshots(); len(s) > 0 {
		e.lastSnap.Store(s[len(s)-1].Checkpoint)
	}
	// Counted by key, not decoded: a start says how many nodes it found
	// without reading every row of a large mesh.
	nodes, err := keysUnder(db, []byte{prefixNode})
	if err != nil {
		db.Close()
		return nil, Opening{}, err
	}
	e.publisher.Open(ctx, o.Store, o.PublishEvery, o.PublishAfter, e.now())
	return e, Opening{Generation: gen, Fresh: fresh, Checkpoint: e.checkpoint.Load(), Stream: st, Nodes: len(nodes), FromSnapshot: from,
		HistoryFrom: historyFrom}, nil
}

// openGeneration opens one generation's Pebble and checks, or on a new one
// records, the stream identity and schema.
func (e *Engine) openGeneration(gen string, st store.State) (*pebble.DB, error) {
	return e.openGenerationWith(gen, st, e.pebbleOptions(false))
}

func (e *Engine) openGenerationWith(gen string, st store.State, opts *pebble.Options) (*pebble.DB, error) {
	path := e.fs.PathJoin(e.o.Dir, gen)
	db, err := pebble.Open(path, opts)
	if err != nil {
		return nil, fmt.Errorf("projections: cannot open the read models in %s: %w", path, err)
	}
	// Without a WAL (a rebuild) there is nothing to sync: the flush
	// before the generation is named makes it durable.
	if err := checkBelongs(db, path, st, &pebble.WriteOptions{Sync: !opts.DisableWAL}); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

func checkBelongs(db *pebble.DB, path string, st store.State, w *pebble.WriteOptions) error {
	var id identity
	found, err := getJSON(db, keyIdentity, &id)
	if err != nil {
		return fmt.Errorf("projections: cannot read the identity of %s: %w", path, err)
	}
	if !found {
		b := db.NewBatch()
		defer b.Close()
		if err := putJSON(b, keyIdentity, identity{Stream: st.Stream, Created: st.Created}); err != nil {
			return err
		}
		if err := b.Set(keySchema, u64(schemaVersion), nil); err != nil {
			return err
		}
		return b.Commit(w)
	}
	var schema uint64
	if v, closer, err := db.Get(keySchema); err == nil {
		schema = getU64(v)
		closer.Close()
	}
	remedy := "they must be folded again from the stream"
	switch {
	case schema != schemaVersion:
		return fmt.Errorf("%w: %s has schema %d, this binary writes %d", ErrSchema, path, schema, schemaVersion)
	case id.Stream != st.Stream || !id.Created.Equal(st.Created):
		return fmt.Errorf("%w: %s was folded from stream %s created %s, but the bus has stream %s created %s; %s",
			ErrForeignStream, path, id.Stream, id.Created.UTC().Format(time.RFC3339Nano), st.Stream, st.Created.UTC().Format(time.RFC3339Nano), remedy)
	}
	if cp := readCheckpoint(db); cp > st.LastSeq {
		return fmt.Errorf("%w: %s has folded up to event %d, but stream %s ends at %d (was it restored from an older backup?); %s",
			ErrRewound, path, cp, st.Stream, st.LastSeq, remedy)
	}
	return nil
}

func readCheckpoint(r pebble.Reader) uint64 { return readU64(r, keyCheckpoint) }

// readU64 reads a meta row holding one number; 0 when there is none.
func readU64(r pebble.Reader, key []byte) uint64 {
	v, closer, err := r.Get(key)
	if err != nil {
		return 0
	}
	defer closer.Close()
	return getU64(v)
}

// Close stops folding and closes the read models. Uncommitted events are
// dropped; the next Open folds them again from the stream.
func (e *Engine) Close() error {
	// A verify or rebuild under way ends (its context is cancelled) and
	// lets go of what it holds of the read models before they close.
	e.closed()
	e.fills.Wait() // it ends with closing: nothing of it outlives Close
	e.longMu.Lock()
	defer e.longMu.Unlock()
	e.runMu.Lock()
	defer e.runMu.Unlock()
	e.stopLocked()
	// After the fold stopped, which is what starts a publish: the one it
	// started last is cut (closing ended) and waited for.
	e.publisher.Wait()
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.db == nil {
		return nil
	}
	err := e.db.Close()
	e.db = nil
	e.cache.Unref()
	if e.dropDir {
		e.fs.RemoveAll(e.o.Dir)
	}
	return err
}

// Status reads the stream's position and compares it with the checkpoint.
func (e *Engine) Status(ctx context.Context) (Status, error) {
	st, err := e.o.Store.State(ctx)
	if err != nil {
		return Status{}, err
	}
	e.mu.RLock()
	s := Status{Generation: e.gen, Checkpoint: e.checkpoint.Load(), StreamLast: st.LastSeq}
	e.mu.RUnlock()
	if s.StreamLast > s.Checkpoint {
		s.Lag = s.StreamLast - s.Checkpoint
	}
	if f := e.Failure(); f != nil {
		s.Failure = f.Error()
	}
	return s, nil
}

// view runs fn against the current read models; a rebuild's swap waits for it.
// long starts a rebuild or a verify: one at a time, and cancelled when the
// engine closes. Call the answer when done.
func (e *Engine) long(ctx context.Context) (context.Context, func()) {
	e.longMu.Lock()
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(e.closing, cancel)
	return ctx, func() { stop(); cancel(); e.longMu.Unlock() }
}

func (e *Engine) view(fn func(pebble.Reader) error) error {
	e.mu.RLock()
	defer e.mu.RUnlock()
	if e.db == nil {
		return errClosed
	}
	return fn(e.db)
}

// errClosed is what a read, a copy or a rebuild of read models already
// closed answers.
var errClosed = errors.New("projections: the read models are closed")

// openChild opens read models as o says, sharing e's block cache (a copy,
// time travel, verify's fold). errClosed once e is closed: its reference
// is given back and the cache may be freed, so a Ref then would panic in
// Pebble (a status as of a past moment still under way as the controller
// stops). The reference is taken under e.mu, which Close holds to let go
// of its own, and held until the child has taken one of its own.
func (e *Engine) openChild(ctx context.Context, o Options) (*Engine, Opening, error) {
	e.mu.RLock()
	if e.db == nil {
		e.mu.RUnlock()
		return nil, Opening{}, errClosed
	}
	e.cache.Ref()
	e.mu.RUnlock()
	defer e.cache.Unref()
	o.Cache = e.cache
	return Open(ctx, o)
}

// decodeRows reads the JSON rows under prefix.
func decodeRows[T any](r pebble.Reader, prefix ...byte) ([]T, error) {
	return scanRows(r, prefix, func(_, v []byte) (T, error) {
		var row T
		err := json.Unmarshal(v, &row)
		return row, err
	})
}

// scanRows reads every row under prefix, in key order, with decode: the
// one scan every read model's listing goes through (scan.Rows, which says
// what decode may touch).
func scanRows[T any](r pebble.Reader, prefix []byte, decode func(key, value []byte) (T, error)) ([]T, error) {
	lo, hi := prefixBounds(prefix...)
	return scan.Rows(r, lo, hi, decode)
}

// dir is the directory the read models live in.
func (e *Engine) dir() disk.Dir { return disk.Dir{FS: e.fs, Path: e.o.Dir} }

// Folded is what read models in dir say of the stream they were folded
// from, without a bus: for a start to tell a lost stream from a new one.
type Folded struct {
	Stream     string
	Created    time.Time
	Checkpoint uint64
}

// Peek reads the identity and checkpoint of the read models in dir, read
// only; found is false when there are none.
func Peek(dir string) (Folded, bool, error) {
	d := disk.Dir{FS: vfs.Default, Path: dir}
	gen, err := d.Current()
	if err != nil || gen == "" {
		return Folded{}, false, err
	}
	db, err := pebble.Open(d.Join(gen), &pebble.Options{ReadOnly: true, Logger: disk.Logger{Log: slog.New(slog.DiscardHandler)}})
	if err != nil {
		return Folded{}, false, fmt.Errorf("projections: cannot read the read models in %s: %w", dir, err)
	}
	defer db.Close()
	var id identity
	found, err := getJSON(db, keyIdentity, &id)
	if err != nil || !found {
		return Folded{}, false, err
	}
	return Folded{Stream: id.Stream, Created: id.Created, Checkpoint: readCheckpoint(db)}, true, nil
}
