package store

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/meshctl/mesh/declaration"
	"github.com/meshctl/mesh/events"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Sentinel errors of the store.
var (
	// ErrConflict: the aggregate moved since it was loaded. Load it again and decide again.
	ErrConflict = errors.New("store: the aggregate changed since it was read")
	// ErrUnsure: an append's expectation was not met and whether it
	// had landed all the same (a retry of our own) could not be read:
	// the stream may hold it. Decide again once the read models say.
	ErrUnsure = errors.New("store: cannot tell whether the append landed")
	// ErrNoEvents: Append was called with nothing to append.
	ErrNoEvents = errors.New("store: nothing to append")
)

// asyncAckWait is how long a pipelined publish waits for its ack before it
// is settled another way (AppendMany's settle: read back, or append again
// under the same id). Without it, an ack lost with a stream leader on a
// cluster left a push waiting for ever; an election takes about a second.
const asyncAckWait = 2 * time.Second

// ackWait is asyncAckWait for AppendMany's windows (acks.go); a test of an
// acknowledgement that never comes waits less.
var ackWait = asyncAckWait

// maxBatch is JetStream's limit of messages in one atomic batch.
const maxBatch = 1000

// Store appends and reads the mesh's events on one stream.
type Store struct {
	nc     *nats.Conn
	js     jetstream.JetStream
	stream jetstream.Stream
	name   string
	// Now stamps events; tests replace it.
	Now func() time.Time
	// Timeout bounds one raw request of this store's (0: CallTimeout): a
	// test that kills the bus twenty times waits less for each lost one.
	Timeout time.Duration
	// MAC is the key the controller proves its events with (rule 19):
	// every Append carries the MAC of its subject and data under it, and
	// the fold sets aside a message under mesh.ev without a good one. Nil
	// on a store that appends nothing (a client's, a node's).
	MAC []byte
	// macs makes MACs under MAC with keyed hashes kept between appends
	// (made again when MAC changes).
	macs atomic.Pointer[declaration.MACs]
	// RememberSends, on the controller's store, keeps each send it appends
	// until a read of this store reads it back (known.go), for the fold
	// that reads through it: set it only on a store a fold follows, or
	// what it keeps waits for a read that never comes (bounded all the
	// same).
	RememberSends bool
	known         known
	// acks are AppendMany's acknowledgements (acks.go).
	acks acks
}

// Open asserts the stream (create or update, idempotent) and returns a store
// on it together with what the assertion found and did.
func Open(ctx context.Context, nc *nats.Conn, c StreamConfig) (*Store, Assertion, error) {
	c = c.withDefaults()
	s := &Store{nc: nc, name: c.Name, Now: time.Now}
	// A pipelined publish of a send is AppendMany's, whose outcomes reach
	// the sends remembered (known.go) through the store's own
	// acknowledgements (acks.go), not the JetStream context's handlers.
	js, err := newJS(nc)
	if err != nil {
		return nil, Assertion{}, fmt.Errorf("store: cannot use JetStream: %w", err)
	}
	st, a, err := assertStream(ctx, js, c)
	if err != nil {
		return nil, a, err
	}
	s.js, s.stream = js, st
	return s, a, nil
}

// Exists reports whether the bus holds the stream called name.
func Exists(ctx context.Context, nc *nats.Conn, name string) (bool, error) {
	js, err := newJS(nc)
	if err != nil {
		return false, fmt.Errorf("store: cannot use JetStream: %w", err)
	}
	_, err = js.Stream(ctx, name)
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("store: cannot look up stream %s: %w", name, err)
	}
	return true, nil
}

// Attach uses an existing stream without asserting it: for clients (mesh
// events) that must not change the bus's configuration.
func Attach(ctx context.Context, nc *nats.Conn, name string) (*Store, error) {
	if name == "" {
		name = events.Stream
	}
	js, err := newJS(nc)
	if err != nil {
		return nil, fmt.Errorf("store: cannot use JetStream: %w", err)
	}
	st, err := js.Stream(ctx, name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, fmt.Errorf("store: the bus has no stream %s yet; start the controller (mesh up or mesh serve) once to create it", name)
	}
	if err != nil {
		return nil, fmt.Errorf("store: cannot look up stream %s: %w", name, err)
	}
	return &Store{nc: nc, js: js, stream: st, name: name, Now: time.Now}, nil
}

// AttachNode uses the stream as a node's identity may on a closed bus: it
// reads its newest declaration by direct get and follows its declarations
// with a filtered consumer, and never asks for the stream's information,
// which would name every subject on it (rule 18).
func AttachNode(nc *nats.Conn, name string) (*Store, error) {
	if name == "" {
		name = events.Stream
	}
	js, err := newJS(nc)
	if err != nil {
		return nil, fmt.Errorf("store: cannot use JetStream: %w", err)
	}
	return &Store{nc: nc, js: js, name: name, Now: time.Now}, nil
}

// needsStream refuses what a node's store (AttachNode) cannot do: it holds
// no handle on the stream, because getting one asks for the stream's
// information, which a closed bus does not grant a node.
func (s *Store) needsStream(what string) error {
	if s.stream == nil {
		return fmt.Errorf("store: a node's store cannot %s stream %s; that is the controller's", what, s.name)
	}
	return nil
}

// NC is the connection the store uses.
func (s *Store) NC() *nats.Conn { return s.nc }

// Name is the stream's name.
func (s *Store) Name() string { return s.name }

// JetStream is the context the store uses, for readers that share it.
func (s *Store) JetStream() jetstream.JetStream { return s.js }

// State reads the stream's current position and identity.
func (s *Store) State(ctx context.Context) (State, error) {
	if err := s.needsStream("read the state of"); err != nil {
		return State{}, err
	}
	info, err := retry(ctx, func() (*jetstream.StreamInfo, error) { return s.stream.Info(ctx) })
	if err != nil {
		return State{}, fmt.Errorf("store: cannot read the state of stream %s: %w", s.name, err)
	}
	return stateOf(info), nil
}

// Append stores the events of one decision on agg, only if agg's last event
// is still at sequence expected (0: agg has no events yet). commandID makes it
// idempotent: a retry of an append that already landed answers the original
// sequence and stores nothing. Several events go in one atomic batch, so a
// decision lands whole or not at all. It answers the sequence of the last event.
func (s *Store) Append(ctx context.Context, agg events.AggregateID, expected uint64, commandID string, evs ...events.Event) (uint64, error) {
	if len(evs) == 0 {
		return 0, ErrNoEvents
	}
	if len(evs) > maxBatch {
		return 0, fmt.Errorf("store: cannot append %d events in one decision: JetStream's atomic batch holds at most %d", len(evs), maxBatch)
	}
	if err := agg.Validate(); err != nil {
		return 0, err
	}
	if err := events.ValidateCommandID(commandID); err != nil {
		// A command id is what makes a retry store nothing: never append without one.
		return 0, err
	}
	now := s.Now()
	msgs := make([]*nats.Msg, len(evs))
	for i, ev := range evs {
		m, err := s.message(agg, commandID, events.ByOf(ctx), i, now, ev)
		if err != nil {
			return 0, err
		}
		msgs[i] = m
	}
	// The expectation rides on the first message: later messages of a batch
	// are checked against the batch's own staged state.
	expect(msgs[0], agg, expected)
	if len(msgs) == 1 {
		// A send appended alone is remembered as AppendMany's are: the
		// live fold's consumer leaves sends out (own.go).
		s.remember(msgs[0], agg, events.ByOf(ctx), now, evs[0])
	}
	return s.commit(ctx, msgs, agg, commandID)
}

// commit publishes msgs, one checked publish or one atomic batch, and
// settles what its errors mean. check is the aggregate of the last message:
// its last message's Msg-Id tells a retry of our own landed write from
// another writer's.
func (s *Store) commit(ctx context.Context, msgs []*nats.Msg, check events.AggregateID, commandID string) (uint64, error) {
	lastID := msgs[len(msgs)-1].Header.Get(jetstream.MsgIDHeader)
	for attempt := 0; ; attempt++ {
		// A fault of the moment (no stream took it while a leader is
		// elected) is tried again by the one transient loop: the same
		// messages, so a try that landed after all answers as a duplicate.
		seq, err := retryFor(ctx, commitFor, func() (uint64, error) { return s.publish(ctx, msgs) })
		if err == nil {
			return seq, nil
		}
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		var apiErr *jetstream.APIError
		if !errors.As(err, &apiErr) {
			return 0, fmt.Errorf("store: cannot append to %s: %w", check, err)
		}
		switch apiErr.ErrorCode {
		case jetstream.JSErrCodeStreamWrongLastSequence, jetstream.JSErrCodeStreamWrongLastSequenceConstant,
			codeAtomicDuplicate:
			// Either someone else moved the aggregate, or this is a retry of
			// our own write that already landed (R1 checks the expectation
			// before the Msg-Id). The aggregate's last message tells which.
			seq, ok, err := s.landed(ctx, check, lastID)
			switch {
			case err != nil:
				return 0, err
			case ok:
				return seq, nil
			}
			return 0, ErrConflict
		case codeDuplicateInProcess:
			// The original of this retry is still being replicated: once it
			// settles, the same publish answers a duplicate ack.
			if attempt >= 50 {
				return 0, fmt.Errorf("store: cannot append to %s: an earlier attempt of command %s stayed in flight", check, commandID)
			}
			select {
			case <-ctx.Done():
				return 0, ctx.Err()
			case <-time.After(20 * time.Millisecond):
			}
		default:
			return 0, fmt.Errorf("store: cannot append to %s: %w", check, storageFault(err))
		}
	}
}

// AppendAtomic appends one event to each of several distinct aggregates as
// one atomic batch: every event is checked against its own aggregate's
// expectation, and one that fails stores none of them (ErrConflict). It is
// how a bulk verb is all or nothing per batch. At most maxBatch items.
func (s *Store) AppendAtomic(ctx context.Context, commandID string, items []One) (uint64, error) {
	switch {
	case len(items) == 0:
		return 0, ErrNoEvents
	case len(items) > maxBatch:
		return 0, fmt.Errorf("store: cannot append %d events in one batch: JetStream's atomic batch holds at most %d", len(items), maxBatch)
	}
	if err := events.ValidateCommandID(commandID); err != nil {
		return 0, err
	}
	seen := make(map[events.AggregateID]bool, len(items))
	now := s.Now()
	msgs := make([]*nats.Msg, len(items))
	for i, it := range items {
		if seen[it.Aggregate] {
			// Two expectations on one aggregate in one batch: the second
			// would be checked against the stream, not the first's write.
			return 0, fmt.Errorf("store: a batch was given two events for %s; give each aggregate one", it.Aggregate)
		}
		seen[it.Aggregate] = true
		if err := it.Aggregate.Validate(); err != nil {
			return 0, err
		}
		// One command id for the batch, the event's place in it for the
		// Msg-Id: a retried batch is the same messages, and lands once.
		m, err := s.message(it.Aggregate, commandID, events.ByOf(ctx), i, now, it.Event)
		if err != nil {
			return 0, err
		}
		expect(m, it.Aggregate, it.Expected)
		msgs[i] = m
	}
	return s.commit(ctx, msgs, items[len(items)-1].Aggregate, commandID)
}

// ErrStorage: the bus cannot store what it is given: its storage is full or
// at its limit. Nothing was recorded; the same write succeeds once there is
// room again.
var ErrStorage = errors.New("the bus cannot store more events: its storage is full or at its limit; free space on the bus's disk or raise its JetStream storage limit, then try again (nothing was recorded)")

// JetStream's codes for a store that is out of room.
const (
	codeAccountResources = 10002 // resource limits exceeded for account
	codeInsufficient     = 10023 // insufficient resources
	codeStorageResources = 10047 // insufficient storage resources available
	codeStoreFailed      = 10077 // storing a message failed (a full disk)
)

// storageFault turns JetStream's out-of-room refusals into ErrStorage, the
// one sentence every command says for them, and leaves any other error be.
func storageFault(err error) error {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		switch apiErr.ErrorCode {
		case codeAccountResources, codeInsufficient, codeStorageResources, codeStoreFailed:
			return fmt.Errorf("%w (%s)", ErrStorage, apiErr.Description)
		}
	}
	return err
}

// message is one event of a decision as it is published, by who asked
// (events.ByOf the append's context: the caller the endpoint identified).
func (s *Store) message(agg events.AggregateID, commandID, by string, i int, at time.Time, ev events.Event) (*nats.Msg, error) {
	data, err := events.Encode(agg, commandID, by, i, at, ev)
	if err != nil {
		return nil, err
	}
	if len(data) > events.MaxEvent {
		return nil, fmt.Errorf("store: a %s of %d bytes is over the %d bytes an event may be", ev.EventType(), len(data), events.MaxEvent)
	}
	m := nats.NewMsg(agg.Subject(ev.EventType()))
	m.Data = data
	m.Header.Set(jetstream.MsgIDHeader, events.EventID(commandID, i))
	if s.MAC != nil {
		m.Header.Set(events.MACHeader, s.mac(m.Subject, data))
	}
	return m, nil
}

// mac is declaration.MAC(s.MAC, subject, data), by a keyed hash an
// earlier append made.
func (s *Store) mac(subject string, data []byte) string {
	m := s.macs.Load()
	if m == nil || !bytes.Equal(m.Key(), s.MAC) {
		m = declaration.NewMACs(s.MAC)
		s.macs.Store(m)
	}
	return m.MAC(subject, data)
}

// expect makes m a checked write on agg's one canonical filter.
func expect(m *nats.Msg, agg events.AggregateID, expected uint64) {
	m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(expected, 10))
	m.Header.Set(jetstream.ExpectedLastSubjSeqSubjHeader, agg.Filter())
}

// isConflict reports whether err is JetStream's "wrong last sequence".
func isConflict(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}

// JetStream error codes nats.go has no constant for.
const (
	codeDuplicateInProcess = 10158 // duplicate message id is in process
	codeAtomicDuplicate    = 10201 // atomic publish batch contains a duplicate message id
)

// publish sends one message as a checked publish, several as an atomic batch.
// A duplicate ack (a retry inside the duplicates window) is success with the
// original sequence.
func (s *Store) publish(ctx context.Context, msgs []*nats.Msg) (uint64, error) {
	if len(msgs) == 1 {
		ack, err := s.js.PublishMsg(ctx, msgs[0])
		if err != nil {
			s.forget(msgs[0])
			return 0, err
		}
		s.stored(msgs[0], ack)
		return ack.Sequence, nil
	}
	id, err := batchID()
	if err != nil {
		return 0, err
	}
	for i, m := range msgs {
		m.Header.Set("Nats-Batch-Id", id)
		m.Header.Set("Nats-Batch-Sequence", strconv.Itoa(i+1))
		if i < len(msgs)-1 {
			// Only the commit needs an answer; the server stages the rest in
			// order, and one connection keeps that order.
			if err := s.nc.PublishMsg(m); err != nil {
				return 0, err
			}
			continue
		}
		m.Header.Set("Nats-Batch-Commit", "1")
	}
	ack, err := s.js.PublishMsg(ctx, msgs[len(msgs)-1])
	if err != nil {
		return 0, err
	}
	return ack.Sequence, nil
}

func batchID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("store: cannot make a batch id: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// landed reports whether the aggregate's last message is the one with msgID,
// and its sequence; ErrUnsure when it cannot tell. A read that failed was
// taken for another writer's message: a retried append that had landed,
// its check cut by the bus going away again, was answered ErrConflict,
// and a push composed that node again and sent it a second time (a
// review's probe found it beside a change since taken back, which settled
// at each reconnect: one send in three of six rounds across four cuts of
// 300 ms).
func (s *Store) landed(ctx context.Context, agg events.AggregateID, msgID string) (uint64, bool, error) {
	if err := s.needsStream("check an append to"); err != nil {
		return 0, false, err
	}
	m, err := retry(ctx, func() (Msg, error) { return s.leaderLast(ctx, agg.Filter()) })
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return 0, false, nil // nothing there: not ours
	}
	if err != nil {
		return 0, false, fmt.Errorf("%w: its expectation on %s was not met, and the aggregate's last event could not be read: %w", ErrUnsure, agg, err)
	}
	return m.Seq, MsgID(m.Header) == msgID, nil
}

// leaderLast is the last message on subject as the stream's leader holds
// it. landed must see what the leader that refused an expectation saw: a
// direct get (GetLastMsgForSubject on the mesh's stream) may be answered
// by a replica behind it, whose older message reads as another writer's,
// and a send the stream holds is then answered ErrConflict and composed
// and sent again. nats.go's JetStream context asks the stream's message
// API, always the leader's, unless told to get directly; its errors are
// put in the store's one kind (jetstream's), so that retry knows a fault
// of the moment from one for good.
func (s *Store) leaderLast(ctx context.Context, subject string) (Msg, error) {
	js, err := s.nc.JetStream()
	if err != nil {
		return Msg{}, err
	}
	call, cancel := s.bound(ctx)
	defer cancel()
	m, err := js.GetLastMsg(s.name, subject, nats.Context(call))
	var apiErr *nats.APIError
	switch {
	case errors.Is(err, nats.ErrMsgNotFound):
		return Msg{}, jetstream.ErrMsgNotFound
	case errors.As(err, &apiErr):
		return Msg{}, &jetstream.APIError{Code: apiErr.Code, ErrorCode: jetstream.ErrorCode(apiErr.ErrorCode), Description: apiErr.Description}
	case err != nil:
		return Msg{}, err
	}
	return Msg{Seq: m.Sequence, Subject: m.Subject, Data: m.Data, Header: m.Header, Time: m.Time}, nil
}

// Version is the stream sequence of agg's last event, 0 when it has none.
func (s *Store) Version(ctx context.Context, agg events.AggregateID) (uint64, error) {
	if err := s.needsStream("read an aggregate of"); err != nil {
		return 0, err
	}
	m, err := retry(ctx, func() (*jetstream.RawStreamMsg, error) { return s.stream.GetLastMsgForSubject(ctx, agg.Filter()) })
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("store: cannot read the last event of %s: %w", agg, err)
	}
	return s.got(m).Seq, nil
}

// Load reads every event of agg in order. The version is the sequence of the
// last one, the value to pass to Append as expected.
func (s *Store) Load(ctx context.Context, agg events.AggregateID) ([]events.Recorded, uint64, error) {
	type loaded struct {
		recs    []events.Recorded
		version uint64
	}
	l, err := retry(ctx, func() (loaded, error) {
		recs, version, err := s.load(ctx, agg)
		return loaded{recs, version}, err
	})
	return l.recs, l.version, err
}

func (s *Store) load(ctx context.Context, agg events.AggregateID) ([]events.Recorded, uint64, error) {
	last, err := s.Version(ctx, agg)
	if err != nil || last == 0 {
		return nil, 0, err
	}
	var out []events.Recorded
	version, from := uint64(0), uint64(1)
	for {
		msgs, pending, err := s.batchGet(ctx, agg.Filter(), from, getBatch)
		if err != nil {
			return nil, 0, fmt.Errorf("store: cannot read %s: %w", agg, err)
		}
		for _, m := range msgs {
			version, from = m.Seq, m.Seq+1
			env, ev, err := events.ReadWhole(m.Subject, m.Data)
			// A foreign message on the aggregate's subjects (rule 19) is
			// none of its events: it is passed over, but it still moves
			// the version, because the stream's expectation counts every
			// message.
			if errors.Is(err, events.ErrForeign) {
				continue
			}
			if err != nil {
				return nil, 0, fmt.Errorf("store: event %d on %s: %w", m.Seq, m.Subject, err)
			}
			out = append(out, events.Recorded{Seq: m.Seq, Subject: m.Subject, Envelope: env, Event: ev})
		}
		// Stop at the version read first, or later if more arrived
		// meanwhile: the version answered is the last message read.
		if pending == 0 && version >= last || len(msgs) == 0 {
			return out, version, nil
		}
	}
}
