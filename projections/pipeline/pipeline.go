package pipeline

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/meshctl/mesh/declaration"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/events/store"
	"github.com/meshctl/mesh/projections/provenance"
)

// Folder is the fold the pipeline hands decoded events to, in stream
// order, on one goroutine: the only one that calls it.
type Folder interface {
	// Apply folds one event; head is the head of the declaration it
	// sends as decoding read it (zero when it sends none), bytes the
	// size of its message.
	Apply(rec events.Recorded, head *declaration.Head, bytes int) error
	// CommitIf commits what is applied when the folder's schedule says
	// (pending: how many events the stream holds after the last one); due
	// is when a commit it deferred must be made (zero: none deferred).
	CommitIf(pending uint64) (due time.Time, err error)
	// CommitWanted commits at once when a waiter waits for an event applied.
	CommitWanted() error
	// Commit commits whatever is applied.
	Commit() error
	// Holding says whether events are applied and not yet committed.
	Holding() bool
	// Last is the last event applied.
	Last() uint64
	// Now is the folder's clock, which a deferred commit is due by.
	Now() time.Time
	// Wake is told when someone begins waiting for an event (nil: never).
	Wake() <-chan struct{}
}

// FoldError stops a fold at the event it could not apply. The fold never
// skips: read models that silently passed over an event would disagree with
// the log, and nobody could tell.
type FoldError struct {
	Seq     uint64
	Subject string
	Err     error
}

func (e *FoldError) Error() string {
	return fmt.Sprintf("projections: folding stopped at event %d (%s): %v", e.Seq, e.Subject, e.Err)
}

func (e *FoldError) Unwrap() error { return e.Err }

// chunkSize is how many messages a decoder takes at a time: large enough that
// the hand-offs cost little per event, small enough that a live event (which
// flushes a chunk of one) is never held back waiting for company.
const chunkSize = 256

type chunk struct {
	msgs []store.Msg
	recs []events.Recorded
	// heads are the heads of the declarations sent among recs (zero for
	// any other event), read once while decoding, on a worker, where
	// checking a declaration reads them anyway: the folder, one
	// goroutine, then does not read them again for history.
	heads []declaration.Head
	err   *FoldError // the first message that would not decode; recs stop before it
	done  chan struct{}
}

type pipeline struct {
	f        Folder
	keys     *declaration.Keyring
	cur      *chunk // filling
	work     chan *chunk
	order    chan *chunk
	free     chan *chunk // folded, to be filled again
	wg       sync.WaitGroup
	result   chan error
	failed   atomic.Pointer[FoldError]
	stopRead func()
	// saidMore is whether the last chunk sent to the folder ended on a
	// message that said more follow (flushHeld). The read's alone.
	saidMore bool
}

// Run folds what read delivers into f through the pipeline and returns
// when the read has ended and everything it delivered is folded: read is
// the stream's read, handing each message to add, with a context that ends
// when the fold fails. A message that says more follow (Msg.Pending) is
// held until they come; flush, called on read's own turn (never beside an
// add), hands on what is held: a read that finds nothing came after all
// calls it, so a count too high holds the fold a moment, not for ever (a
// push waiting for its last send waited for ever when the own read said
// one more followed it; events/store/own.go). keys are what provenance holds each
// message to. A fold error wins over the read error it caused.
func Run(ctx context.Context, f Folder, keys *declaration.Keyring, read func(ctx context.Context, add func(store.Msg) error, flush func()) error) error {
	// A failed fold must end a following read at once, not at the next
	// event, which may never come.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	p := newPipeline(f, keys, runtime.GOMAXPROCS(0), cancel)
	readErr := read(ctx, p.add, p.flushHeld)
	if err := p.close(); err != nil {
		return err
	}
	// Whatever was applied is committed before this fold returns, so that
	// the next read, which starts after the committed checkpoint, never
	// applies an event twice.
	if err := f.Commit(); err != nil {
		return err
	}
	return readErr
}

func newPipeline(f Folder, keys *declaration.Keyring, workers int, stopRead func()) *pipeline {
	p := &pipeline{
		f: f, keys: keys, stopRead: stopRead,
		work: make(chan *chunk, workers*2), order: make(chan *chunk, workers*4),
		free:   make(chan *chunk, workers*4+2),
		result: make(chan error, 1),
	}
	p.cur = p.newChunk()
	for range workers {
		p.wg.Go(p.decode)
	}
	go p.apply()
	return p
}

// add is the read callback. It stops the read once folding has failed.
func (p *pipeline) add(m store.Msg) error {
	if fe := p.failed.Load(); fe != nil {
		return fe
	}
	p.cur.msgs = append(p.cur.msgs, m)
	if len(p.cur.msgs) >= chunkSize || m.Pending == 0 {
		p.flush()
	}
	return nil
}

// flushHeld is flush for the read, which says nothing came after what it
// handed last: that is the last there is for now, whatever it said, so
// the folder commits it as it commits a caught-up event (CommitIf). When
// it went to the folder already, in a full chunk, an empty chunk says so.
// Nothing once folding has failed.
func (p *pipeline) flushHeld() {
	switch {
	case p.failed.Load() != nil:
	case len(p.cur.msgs) > 0:
		p.cur.msgs[len(p.cur.msgs)-1].Pending = 0
		p.flush()
	case p.saidMore:
		c := p.newChunk()
		close(c.done) // nothing to decode
		p.order <- c
		p.saidMore = false
	}
}

func (p *pipeline) flush() {
	if len(p.cur.msgs) == 0 {
		return
	}
	c := p.cur
	p.cur = p.newChunk()
	p.saidMore = c.msgs[len(c.msgs)-1].Pending > 0
	// order first: the folder must learn of a chunk before any later one.
	p.order <- c
	p.work <- c
}

// newChunk answers a folded chunk to fill again, or a new one. Reusing them
// keeps a fold's garbage to what decoding must make: the chunks' slices were
// a tenth of what a rebuild allocated, and the collector's work grows with it.
func (p *pipeline) newChunk() *chunk {
	select {
	case c := <-p.free:
		c.msgs, c.recs, c.heads, c.err, c.done = c.msgs[:0], c.recs[:0], c.heads[:0], nil, make(chan struct{})
		return c
	default:
		return &chunk{msgs: make([]store.Msg, 0, chunkSize), recs: make([]events.Recorded, 0, chunkSize),
			heads: make([]declaration.Head, 0, chunkSize), done: make(chan struct{})}
	}
}

// recycle offers a folded chunk for reuse. Its messages and events are
// cleared first, so the free list holds on to nothing a fold has finished with.
func (p *pipeline) recycle(c *chunk) {
	clear(c.msgs)
	clear(c.recs)
	clear(c.heads)
	select {
	case p.free <- c:
	default:
	}
}

// decode reads each message and holds it to its writer's right (rule 19):
// a message that is not its rightful writer's event is marked foreign, to
// be set aside by the folder. Only a newer controller's event stops the
// fold: this binary cannot read it, and must not fold past it.
func (p *pipeline) decode() {
	var macs declaration.MACChecker
	for c := range p.work {
		for _, m := range c.msgs {
			env, ev, err := read(m)
			if errors.Is(err, events.ErrNewer) {
				c.err = &FoldError{Seq: m.Seq, Subject: m.Subject, Err: err}
				break
			}
			rec := events.Recorded{Seq: m.Seq, Subject: m.Subject, Envelope: env, Event: ev, Stored: m.Time, Foreign: err}
			var head declaration.Head
			if err == nil {
				rec.Signer, rec.Verified, rec.Foreign = provenance.Of(p.keys, &macs, m, ev, &head)
				if provenance.IsStanding(ev) {
					rec.Voucher = provenance.Header(m, events.VoucherHeader)
				}
			} else {
				rec.Signer = provenance.Header(m, events.SignerHeader)
			}
			c.recs = append(c.recs, rec)
			c.heads = append(c.heads, head)
		}
		close(c.done)
	}
}

// read decodes m and holds it to the rights of its type and subject
// (events.Read). A message the store appended itself and read back byte
// for byte (store.Known) is not decoded again: what decoding it answers is
// at hand. Its rights are checked all the same.
func read(m store.Msg) (events.Envelope, events.Event, error) {
	if k := m.Known; k != nil {
		return k.Envelope, k.Event, events.Check(m.Subject, k.Envelope, k.Event)
	}
	return events.Read(m.Subject, m.Data)
}

// apply folds chunks in read order. After a failure it commits what came
// before the bad event (it is good), and drains the rest unread so that the
// reader never blocks on a folder that has stopped.
//
// A commit the live folder defers (CommitIf, its trickle window) is made
// here, on this goroutine, the folder's only one: when its timer fires,
// when a waiter wakes it for an event already applied, or by the next
// chunk's commit. When the read ends, Run commits what is left, so a stop
// within the window loses nothing and the next read starts after it. A
// timer rather than committing only when no chunk is queued: at 0.3 ms
// apart the folder is idle between events and nothing is ever queued.
func (p *pipeline) apply() {
	var (
		failure error
		timer   *time.Timer
		due     <-chan time.Time // nil: no commit deferred
	)
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		var at time.Time // when a commit deferred must be made
		select {
		case c, ok := <-p.order:
			if !ok {
				p.result <- failure
				return
			}
			if failure != nil {
				continue
			}
			<-c.done
			// A failure, or a time-travel fold reaching its moment:
			// either way what came before is committed and the read
			// ends.
			var err error
			at, err = p.applyChunk(c)
			p.recycle(c)
			failure = p.failIf(err)
		case <-due:
			due = nil
			if failure == nil {
				failure = p.failIf(p.f.Commit())
			}
		case <-p.f.Wake():
			if failure == nil {
				failure = p.failIf(p.f.CommitWanted())
			}
		}
		switch {
		case failure != nil:
		case !p.f.Holding():
			// Committed: a timer still set would only commit nothing.
			if due != nil {
				timer.Stop()
				due = nil
			}
		case !at.IsZero() && due == nil:
			wait := at.Sub(p.f.Now())
			if timer == nil {
				timer = time.NewTimer(wait)
			} else {
				timer.Reset(wait)
			}
			due = timer.C
		}
	}
}

// failIf, given the error that stops the fold, commits what came before it
// and ends the read; it answers the failure.
func (p *pipeline) failIf(failure error) error {
	if failure == nil {
		return nil
	}
	if cerr := p.f.Commit(); cerr != nil {
		failure = cerr
	}
	if fe, ok := failure.(*FoldError); ok {
		p.failed.Store(fe)
	} else {
		p.failed.Store(&FoldError{Seq: p.f.Last() + 1, Err: failure})
	}
	p.stopRead()
	return failure
}

// applyChunk applies c and commits as commitIf says; due is when a
// deferred commit must be made (zero: none deferred).
func (p *pipeline) applyChunk(c *chunk) (due time.Time, err error) {
	for i, rec := range c.recs {
		if err := p.f.Apply(rec, &c.heads[i], len(c.msgs[i].Data)); err != nil {
			return time.Time{}, err
		}
	}
	if c.err != nil {
		return time.Time{}, c.err
	}
	var pending uint64 // none after an empty chunk (flushHeld)
	if n := len(c.msgs); n > 0 {
		pending = c.msgs[n-1].Pending
	}
	return p.f.CommitIf(pending)
}

// close flushes what is buffered, waits for every chunk to be folded, and
// answers the fold's failure if there was one.
func (p *pipeline) close() error {
	if p.failed.Load() == nil {
		p.flush()
	}
	close(p.order)
	close(p.work)
	p.wg.Wait()
	return <-p.result
}
