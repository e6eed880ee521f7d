package store

import (
	"bytes"
	"strings"
	"sync"
	"time"

	"github.com/meshctl/mesh/events"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Known is what this store knows of a message it appended itself, handed
// to the reader that reads the message back (Msg.Known): the envelope and
// event the fold's decoding of its bytes answers (events.DecodeFromSubject),
// and the key its MAC was made with. A read sets it only on a message whose
// subject, data and MAC header are byte for byte the ones this store
// published, so it is never a second word beside the log's: it is what
// decoding the log's own bytes gives, already at hand (issue 34 point 1:
// decoding each send again, its sealed bytes in base64, and checking a MAC
// this controller had just made were a tenth of its CPU a pushed node).
type Known struct {
	Envelope events.Envelope
	Event    events.Event
	// MACKey is the key the MAC header was made with: a reader holding the
	// log to another key checks the MAC itself.
	MACKey []byte
}

// appended is one message remembered between its publish and its read.
type appended struct {
	// msg is the message published, while it is in flight: its
	// acknowledgement names it, and only its own is taken for it (two
	// appends under one Msg-Id at once are two messages, and the stream
	// stores one). Dropped once acknowledged.
	msg *nats.Msg
	// bare is a send remembered past rememberAppends: only that it is
	// this store's, so the reader reads it from the stream at once
	// rather than waiting for an acknowledgement it takes for another's.
	bare    bool
	subject string
	data    []byte
	header  nats.Header // as published: the stream stores these headers
	mac     string
	known   *Known // made at the append, so a read allocates nothing
	stored  time.Time
}

// known are the sends this store appended and the live fold has not read
// yet: by Msg-Id while their publish is in flight (m), then, once the
// stream has acknowledged storing them, by the sequence it gave them
// (acked), where the fold's reader (own.go) takes them without the bus
// delivering them again.
type known struct {
	mu    sync.Mutex
	m     map[string]appended
	acked map[uint64]appended
	// low is the last sequence the own reader has handed on: an
	// acknowledgement at or below it comes after the reader took the
	// message from the stream, and is dropped.
	low uint64
	// changed is closed and made again at every acknowledgement or
	// failure of a remembered send: the own reader waits on it.
	changed chan struct{}
}

// wake tells a waiting reader that what is known changed. Held: mu.
func (k *known) wake() {
	if k.changed != nil {
		close(k.changed)
	}
	k.changed = make(chan struct{})
}

// waiting is the channel the next change closes.
func (k *known) waiting() <-chan struct{} {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.changed == nil {
		k.changed = make(chan struct{})
	}
	return k.changed
}

// bareAppends bounds the sends remembered bare, past rememberAppends: a
// fold far behind a push (or none at all) holds no more than this many,
// each a Msg-Id and a sequence once acknowledged (while in flight, the
// message too, which its publish holds anyway).
const bareAppends = 64 * window

// rememberAppends bounds what a store remembers whole: a push's windows
// in flight and the fold's lag behind them. A store whose messages nobody
// reads back (no fold) fills it, then remembers sends bare up to
// bareAppends, then nothing more; one whose appends fail forgets them at
// once (AppendMany).
var rememberAppends = 4 * window

// remember keeps m, a DeclarationSent of ev appended at agg, for Read.
// Only a send is remembered: it is the one appended by the thousand
// (AppendMany), and the one whose decoding costs (its sealed bytes), and
// Encode writes each of its fields as it is (validated names, hex
// digests, bytes in base64), so its decoding answers it unchanged
// (TestAReadBackSendIsWhatItsBytesDecodeTo holds the two equal).
func (s *Store) remember(m *nats.Msg, agg events.AggregateID, by string, at time.Time, ev events.Event) {
	sent, ok := ev.(events.DeclarationSent)
	if !ok || !s.RememberSends || s.MAC == nil {
		return
	}
	if len(sent.Proof) == 0 {
		sent.Proof = nil // decoding answers nil for none
	}
	id := m.Header.Get(jetstream.MsgIDHeader)
	s.known.mu.Lock()
	defer s.known.mu.Unlock()
	if s.known.m == nil {
		s.known.m = make(map[string]appended)
	}
	switch n := len(s.known.m) + len(s.known.acked); {
	case n >= bareAppends:
		return
	case n >= rememberAppends:
		s.known.m[id] = appended{msg: m, bare: true}
		return
	}
	s.known.m[id] = appended{msg: m, subject: m.Subject, data: m.Data, header: m.Header, mac: m.Header.Get(events.MACHeader),
		known: &Known{Envelope: events.FoldedEnvelope(agg, by, at, sent), Event: sent, MACKey: s.MAC}}
}

// forget drops what was remembered of a message whose append failed.
func (s *Store) forget(m *nats.Msg) {
	if m == nil || !s.RememberSends {
		return
	}
	id := m.Header.Get(jetstream.MsgIDHeader)
	s.known.mu.Lock()
	defer s.known.mu.Unlock()
	if a, ok := s.known.m[id]; ok && a.msg == m {
		delete(s.known.m, id)
		s.known.wake()
	}
}

// stored is every pipelined publish's acknowledgement: a remembered send
// the stream stored is kept by the sequence it was given, for the own
// reader. A duplicate's sequence is an earlier message's, whose bytes need
// not be these (a retry's time differs), so it is forgotten and read from
// the stream like any other.
// It runs on the goroutine of AppendMany's acknowledgements (acks.go), or
// in publish, after a checked publish of one message, and must not block.
func (s *Store) stored(m *nats.Msg, ack *jetstream.PubAck) {
	if m == nil || ack == nil || !s.RememberSends {
		return
	}
	id := m.Header.Get(jetstream.MsgIDHeader)
	k := &s.known
	k.mu.Lock()
	defer k.mu.Unlock()
	a, ok := k.m[id]
	if !ok || a.msg != m {
		return // not remembered, or another append under the same Msg-Id
	}
	delete(k.m, id)
	if !ack.Duplicate && ack.Stream == s.name && ack.Sequence > k.low {
		if k.acked == nil {
			k.acked = make(map[uint64]appended)
		}
		a.stored, a.msg = s.Now(), nil
		k.acked[ack.Sequence] = a
	}
	k.wake()
}

// take hands over the send the stream stored at seq, if this store
// appended it and nobody took it yet.
func (k *known) take(seq uint64) (appended, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	a, ok := k.acked[seq]
	if ok {
		delete(k.acked, seq)
	}
	return a, ok
}

// read says the own reader has handed on seq, and every sequence before
// it: a send kept at seq is dropped (the stream's copy was read instead),
// and an acknowledgement still to come for one is not kept.
func (k *known) read(seq uint64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.low = seq
	delete(k.acked, seq)
}

// state is whether the send at seq is kept, how many are, and whether a
// remembered send still awaits its acknowledgement.
func (k *known) state(seq uint64) (has bool, kept int, inflight bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	_, has = k.acked[seq]
	return has, len(k.acked), len(k.m) > 0
}

// bareTo is the last of the bare sends kept one after another from seq on,
// seq-1 when seq is not one.
func (k *known) bareTo(seq uint64) uint64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	for {
		if a, ok := k.acked[seq]; !ok || !a.bare {
			return seq - 1
		}
		seq++
	}
}

// first is the lowest sequence kept, 0 for none: a look at every one.
func (k *known) first() uint64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	var first uint64
	for q := range k.acked {
		if first == 0 || q < first {
			first = q
		}
	}
	return first
}

// restart drops what is kept at or below seq, where a new read starts
// after: the reader before it may have taken no more.
func (k *known) restart(seq uint64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.low = seq
	for q := range k.acked {
		if q <= seq {
			delete(k.acked, q)
		}
	}
}

// sentSuffix ends the subject of every send: the type's own name, so a
// renamed event type cannot leave recall matching nothing.
var sentSuffix = "." + events.DeclarationSent{}.EventType()

// recall answers what this store knows of msg, when it appended exactly
// these bytes: a send the stream acknowledged is known by its sequence,
// one still in flight by its Msg-Id. It only looks: the live fold's reader
// (own.go) takes what it hands on, and a rebuild, verify or audit reading
// beside it must not take a send from under it.
func (s *Store) recall(msg Msg) *Known {
	if !s.RememberSends || !strings.HasSuffix(msg.Subject, sentSuffix) {
		return nil
	}
	id := msg.Header[jetstream.MsgIDHeader]
	if len(id) == 0 {
		return nil
	}
	s.known.mu.Lock()
	a, ok := s.known.acked[msg.Seq]
	if !ok {
		a, ok = s.known.m[id[0]]
	}
	s.known.mu.Unlock()
	mac := msg.Header[events.MACHeader]
	if !ok || a.bare || a.subject != msg.Subject || len(mac) != 1 || a.mac != mac[0] || !bytes.Equal(a.data, msg.Data) {
		return nil
	}
	return a.known
}
