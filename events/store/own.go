package store

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/meshctl/mesh/events"
	"github.com/nats-io/nats.go/jetstream"
)

// The live fold's read of the controller's own sends (issue 34 point 1,
// the bus's row). A push appends a send a node, and the bus delivered each
// back to the fold that made it: a delivery per pushed node that the floor
// of two publishes does not have. The controller holds those bytes already,
// and the stream's acknowledgement says it stored exactly them at a
// sequence. So the fold's consumer asks for every subject of the stream but
// the sends', and the reader puts each send this store appended in its
// place between the messages the consumer delivers, in stream order.
//
// What the consumer leaves out and memory does not hold (a send whose
// acknowledgement was lost, another writer's send, a message under no
// subject the filters name) is read from the stream: a consumer delivers
// in stream order, so every sequence missing below a delivered one is such
// a message, and is read before it. A send kept past a gap that no
// delivery closes is the one case the consumer cannot settle (the gap may
// be a message on its way, or one it will never deliver): after ownGrace
// the stream is asked for it.

// ownGrace is how long a kept send waits behind a sequence nobody has
// delivered before that sequence is read from the stream. A message on its
// way through the consumer closes the gap within a millisecond or so; the
// wait only bounds how late the fold is behind a message no filter names.
// (A variable: a test shortens it.)
var ownGrace = 200 * time.Millisecond

// ownTail is how often a reader looks whether it has handed nothing on
// since its last look, and then asks the stream whether it holds more
// than the consumer delivered: a message no filter names, or another
// writer's send, last in the stream, with nobody waiting for it, is folded
// within two of these. An idle controller asks once a second for a
// stream's state (a variable: a test changes it).
var ownTail = time.Second

// A send handed on from memory carries, as its time, when its
// acknowledgement came, not the stream's stamp (an acknowledgement has
// none): the fold reads a message's stored time only for a report or a
// foreign message, and a send this store appended under the key the fold
// holds is foreign only if the fold's admission refuses it (a send to a
// node the log has retired meanwhile, say), whose row then says when the
// controller heard it stored, a moment from the stream's.

// sentType is the one type the own reader's consumer leaves out.
var sentType = events.DeclarationSent{}.EventType()

// ownFilters are the subjects of every event but a send: each controller
// type under its own kind, and every report.
func ownFilters() []string {
	out := []string{events.SubjectsReports}
	for typ, r := range events.Rights {
		if r.Writer == events.ByController && typ != sentType {
			out = append(out, events.EventPrefix+"."+r.Kind+".*."+typ)
		}
	}
	slices.Sort(out)
	return out
}

// ownRead is one live read that takes this store's sends from memory.
type ownRead struct {
	s  *Store
	fn func(Msg) error
	// mu is held while fn runs, and stopped set under it when the read
	// ends: fn is never called after readOwn has returned.
	mu      sync.Mutex
	stopped bool
	// next is the first sequence not yet handed to fn; behind how many
	// messages the consumer has still to deliver past next, as it said
	// with its last (at) and less each read from the stream since;
	// ticked what next was at the last look at the stream's end.
	next   uint64
	behind uint64
	at     uint64
	ticked uint64
	// onIdle is ReadOptions.Idle.
	onIdle func()
}

// readOwn follows the stream from from on, as Read with Follow does, taking
// this store's own sends from memory (the comment above).
func (s *Store) readOwn(ctx context.Context, o ReadOptions, fn func(Msg) error) error {
	r := &ownRead{s: s, fn: fn, next: max(o.From, 1), onIdle: o.Idle}
	r.at = r.next - 1
	wanted := o.Wanted
	if wanted == nil {
		wanted = func() uint64 { return math.MaxUint64 }
	}
	s.known.restart(r.next - 1)
	cfg := jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: r.next,
		FilterSubjects: ownFilters()}
	cons, err := retry(ctx, func() (jetstream.Consumer, error) { return s.js.OrderedConsumer(ctx, s.name, cfg) })
	if err != nil {
		return fmt.Errorf("store: cannot read stream %s: %w", s.name, err)
	}
	end := newEnding()
	// step runs one of the reader's moves under mu, and ends the read at
	// its first error.
	step := func(move func() error) {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.stopped {
			return
		}
		if err := move(); err != nil {
			r.stopped = true
			end.finish(err)
		}
	}
	// What the consumer has to deliver, until its first message says.
	if info := cons.CachedInfo(); info != nil {
		r.behind = info.NumPending
	}
	cc, err := cons.Consume(func(m jetstream.Msg) {
		step(func() error { return r.consumed(ctx, m) })
	}, jetstream.PullMaxBytes(readBytes))
	if err != nil {
		return fmt.Errorf("store: cannot read stream %s: %w", s.name, err)
	}
	defer func() {
		cc.Stop()
		r.mu.Lock()
		r.stopped = true
		r.mu.Unlock()
		s.deleteConsumer(cons)
	}()
	var grace *time.Timer
	defer func() {
		if grace != nil {
			grace.Stop()
		}
	}()
	var graceC <-chan time.Time
	tail := time.NewTicker(ownTail)
	defer tail.Stop()
	// A waiter's sequence past the consumer's end is read at once, once
	// for each sequence waited for and place of the reader: a read that
	// found nothing (the stream not there yet) waits out the grace.
	var askedFor, askedAt uint64
	for {
		changed := s.known.waiting()
		stuck, urgent := false, false
		step(func() error {
			if err := r.ahead(ctx); err != nil {
				return err
			}
			w := wanted()
			stuck = r.held(w)
			if urgent = stuck && r.waitedFor(w) && (w != askedFor || r.next != askedAt); urgent {
				askedFor, askedAt = w, r.next
			}
			return nil
		})
		if urgent {
			step(func() error { return r.unstick(ctx, wanted()) })
			continue
		}
		switch {
		case !stuck:
			if grace != nil {
				grace.Stop()
				grace, graceC = nil, nil
			}
		case grace == nil:
			grace = time.NewTimer(ownGrace)
			graceC = grace.C
		}
		select {
		case <-end.done:
			return end.result
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		case <-o.Asked:
		case <-graceC:
			grace, graceC = nil, nil
			step(func() error { return r.unstick(ctx, wanted()) })
		case <-tail.C:
			step(func() error { return r.idle(ctx) })
		}
	}
}

// consumed hands on what lies before the consumer's message m that the
// consumer left out, then m, then the sends kept after it.
func (r *ownRead) consumed(ctx context.Context, m jetstream.Msg) error {
	md, err := m.Metadata()
	if err != nil {
		return fmt.Errorf("store: message on %s has no metadata: %w", m.Subject(), err)
	}
	seq := md.Sequence.Stream
	if seq < r.next {
		return nil // read already, from the stream, to close a gap
	}
	r.behind, r.at = md.NumPending, seq
	if err := r.fill(ctx, seq-1); err != nil {
		return err
	}
	msg := Msg{Seq: seq, Subject: m.Subject(), Data: m.Data(), Header: m.Headers(), Time: md.Timestamp}
	msg.Pending = r.pending(seq)
	if err := r.hand(msg); err != nil {
		return err
	}
	return r.ahead(ctx)
}

// fill hands on every sequence from r.next to upto, none of which the
// consumer delivers: each a send kept here, or read from the stream once
// no remembered send awaits its acknowledgement, or after ownGrace. The
// stream sends a message's acknowledgement before it delivers a later
// one, on the same connection, though the client hands the two to
// different goroutines: a send of this store's that is not kept yet is
// almost always one whose acknowledgement is being handled, and a send
// remembered bare is kept all the same, so the wait is long only behind
// another writer's message while this store has sends in flight.
func (r *ownRead) fill(ctx context.Context, upto uint64) error {
	var wait *time.Timer
	defer func() {
		if wait != nil {
			wait.Stop()
		}
	}()
	waited := false
	for r.next <= upto {
		if err := r.ahead(ctx); err != nil {
			return err
		}
		if r.next > upto {
			return nil
		}
		changed := r.s.known.waiting()
		has, _, inflight := r.s.known.state(r.next)
		if has {
			continue
		}
		if inflight && !waited {
			if wait == nil {
				wait = time.NewTimer(ownGrace)
			}
			select {
			case <-changed:
				continue
			case <-wait.C:
				waited = true
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if err := r.fetch(ctx, upto); err != nil {
			return err
		}
	}
	return nil
}

// held is whether the reader is held behind a sequence nobody delivers:
// a send is kept past it, or the consumer has nothing more to deliver
// and someone waits for it.
func (r *ownRead) held(wanted uint64) bool {
	has, kept, _ := r.s.known.state(r.next)
	return !has && (kept > 0 || r.waitedFor(wanted))
}

// waitedFor is whether someone waits for a sequence the consumer, having
// nothing more to deliver, will not bring.
func (r *ownRead) waitedFor(wanted uint64) bool {
	return r.behind == 0 && wanted != math.MaxUint64 && wanted >= r.next
}

// upto is how far the reader is held behind sequences nobody delivers:
// up to the send kept past r.next, or, when the consumer has nothing more
// to deliver, up to what someone waits for; below r.next when it is not
// held. The first costs a look at every send kept, so it is answered
// only when r.next itself is not kept.
func (r *ownRead) upto(wanted uint64) uint64 {
	has, kept, _ := r.s.known.state(r.next)
	switch {
	case has:
		return 0
	case kept > 0:
		return r.s.known.first() - 1
	case r.behind == 0 && wanted != math.MaxUint64:
		return wanted
	}
	return 0
}

// unstick reads from the stream what the reader has been held behind for
// ownGrace, and hands on what memory holds after it.
func (r *ownRead) unstick(ctx context.Context, wanted uint64) error {
	if err := r.ahead(ctx); err != nil {
		return err
	}
	if upto := r.upto(wanted); upto >= r.next {
		if err := r.fetch(ctx, upto); err != nil {
			return err
		}
	}
	return r.ahead(ctx)
}

// idle reads what the stream holds past the consumer's last message when
// the reader has handed nothing on for a whole ownTail and the consumer
// has nothing more to deliver. Having handed nothing on, it tells the
// reader so first (onIdle): what it handed last may have said more follow
// than came (pending's comment), and the fold holds such a message.
func (r *ownRead) idle(ctx context.Context) error {
	if r.next == r.ticked && r.onIdle != nil {
		r.onIdle()
	}
	if r.next != r.ticked || r.behind > 0 {
		r.ticked = r.next
		return nil
	}
	st, err := r.s.State(ctx)
	if err != nil || st.LastSeq < r.next {
		return nil // asked again at the next tick
	}
	if err := r.fetch(ctx, st.LastSeq); err != nil {
		return err
	}
	r.ticked = r.next
	return r.ahead(ctx)
}

// fetch reads the stream from r.next to upto and hands on each message:
// by batched direct gets (direct.go) while they answer each sequence in
// turn, then, for what they left, by a read of the range. Every gap read
// by a read made a consumer on the stream and removed it, which can wait
// up to consumerDeleteWait: a controller folding another's pushes (a
// standby, or mesh traffic) reads a gap between nearly every two reports.
// A direct get may be answered by a replica behind the leader, and a
// stream from before deletes were denied may have holes: a sequence the
// gets do not answer is left to the read, whose consumer the leader
// serves, and which alone may pass over it.
func (r *ownRead) fetch(ctx context.Context, upto uint64) error {
	// Not while the connection is away: a get published then waits out
	// the call's timeout for its answer, the read's own retries do better.
	for r.next <= upto && r.s.nc.IsConnected() {
		msgs, _, err := r.s.batchGet(ctx, ">", r.next, int(min(upto-r.next+1, getBatch)))
		if err != nil {
			break // the read below says what is wrong, or reads it
		}
		moved := false
		for _, m := range msgs {
			if m.Seq != r.next || m.Seq > upto {
				break
			}
			// As a read hands it: with what this store knows of it.
			m.Known = r.s.recall(m)
			r.readAhead(m)
			m.Pending = r.pending(m.Seq)
			if err := r.hand(m); err != nil {
				return err
			}
			moved = true
		}
		if !moved {
			break
		}
	}
	if r.next > upto {
		return nil
	}
	from := r.next
	err := r.s.Read(ctx, ReadOptions{From: from, Until: upto}, func(m Msg) error {
		if m.Seq < r.next {
			return nil
		}
		r.readAhead(m)
		m.Pending = r.pending(m.Seq)
		return r.hand(m)
	})
	if err != nil {
		return err
	}
	if r.next == from {
		// Nothing there. Passed over only once the stream has reached
		// upto: then no message holds these sequences (a stream from
		// before deletes were denied may have holes), and the reader must
		// not wait for them; short of it, they are still to come.
		st, err := r.s.State(ctx)
		if err != nil {
			return err
		}
		if st.LastSeq >= upto {
			r.next = upto + 1
			r.s.known.read(upto)
		}
	}
	return nil
}

// ahead hands on the sends kept from r.next on, as long as they follow on;
// those kept bare, from the stream.
func (r *ownRead) ahead(ctx context.Context) error {
	for {
		a, ok := r.s.known.take(r.next)
		if !ok {
			return nil
		}
		if a.bare {
			if err := r.fetch(ctx, r.s.known.bareTo(r.next+1)); err != nil {
				return err
			}
			continue
		}
		msg := Msg{Seq: r.next, Subject: a.subject, Data: a.data, Header: a.header, Time: a.stored, Known: a.known}
		msg.Pending = r.pending(r.next)
		if err := r.hand(msg); err != nil {
			return err
		}
	}
}

// pending is how many messages are known to follow seq, the one about to
// be handed on: the consumer's word, the sends kept after it, and the
// consumer's last message when it is held back behind seq (a gap below it
// being filled: at past seq). Never more
// than will come: the fold's pipeline holds a message that says more
// follow until the next, and a waiter for it then waits for ever. So a
// send kept at seq itself (one read from the stream while its
// acknowledgement came) is not counted: its copy in memory is dropped as
// it is handed on, and nothing follows for it. Counted, a push whose last
// send was read so waited for ever (TestFaultControllerKilledMidPush,
// about one run in twenty).
func (r *ownRead) pending(seq uint64) uint64 {
	has, kept, _ := r.s.known.state(seq)
	if has {
		kept--
	}
	n := r.behind + uint64(kept)
	if r.at > seq {
		n++
	}
	return n
}

// readAhead takes m, read from the stream, off what the consumer has still
// to deliver, when it is one the consumer would deliver past its last:
// the consumer will deliver it later, to be passed over, and its word
// counted before would otherwise say forever that one more follows (the
// fault pending's comment names). Only a send (an event's subject of the
// send's type, which no filter names) is surely not one: a message outside
// every filter taken off too makes behind short, which costs only an early
// read of the stream, where one counted twice would hold the fold. So a
// report whose subject ends as a send's does (a stranger's, on an open
// bus: the reports' filter names it).
func (r *ownRead) readAhead(m Msg) {
	if m.Seq > r.at && r.behind > 0 && !isSend(m.Subject) {
		r.behind--
	}
}

// isSend is whether subject is a send's, which the own reader's consumer
// never delivers.
func isSend(subject string) bool {
	return strings.HasPrefix(subject, events.EventPrefix+".") && strings.HasSuffix(subject, sentSuffix)
}

// hand gives m to the reader's function and moves past it.
func (r *ownRead) hand(m Msg) error {
	if err := r.fn(m); err != nil {
		return err
	}
	r.next = m.Seq + 1
	r.s.known.read(m.Seq)
	return nil
}
