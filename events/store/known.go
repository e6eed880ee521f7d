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
	subject string
	data    []byte
	mac     string
	known   *Known // made at the append, so a read allocates nothing
}

// known are the sends appended and not yet read back, by Msg-Id.
type known struct {
	mu sync.Mutex
	m  map[string]appended
}

// rememberAppends bounds what a store remembers: a push's windows in
// flight and the fold's lag behind them. A store whose messages nobody
// reads back (no fold) fills it and then remembers nothing more; one
// whose appends fail forgets them at once (AppendMany).
const rememberAppends = 4 * window

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
	if len(s.known.m) >= rememberAppends {
		return
	}
	s.known.m[id] = appended{subject: m.Subject, data: m.Data, mac: m.Header.Get(events.MACHeader),
		known: &Known{Envelope: events.FoldedEnvelope(agg, by, at, sent), Event: sent, MACKey: s.MAC}}
}

// forget drops what was remembered of a message whose append failed.
func (s *Store) forget(m *nats.Msg) {
	if m == nil || !s.RememberSends {
		return
	}
	s.known.mu.Lock()
	delete(s.known.m, m.Header.Get(jetstream.MsgIDHeader))
	s.known.mu.Unlock()
}

// sentSuffix ends the subject of every send: the type's own name, so a
// renamed event type cannot leave recall matching nothing.
var sentSuffix = "." + events.DeclarationSent{}.EventType()

// recall answers what this store knows of msg, when it appended exactly
// these bytes, and forgets it: a message is read back once by the fold.
func (s *Store) recall(msg Msg) *Known {
	if !s.RememberSends || !strings.HasSuffix(msg.Subject, sentSuffix) {
		return nil
	}
	id := msg.Header[jetstream.MsgIDHeader]
	if len(id) == 0 {
		return nil
	}
	s.known.mu.Lock()
	a, ok := s.known.m[id[0]]
	if ok {
		delete(s.known.m, id[0])
	}
	s.known.mu.Unlock()
	mac := msg.Header[events.MACHeader]
	if !ok || a.subject != msg.Subject || len(mac) != 1 || a.mac != mac[0] || !bytes.Equal(a.data, msg.Data) {
		return nil
	}
	return a.known
}
