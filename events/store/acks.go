package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// AppendMany's acknowledgements are taken by the store itself, not by the
// JetStream context's asynchronous publish: one subscription to an inbox
// of the store's, each publish's reply subject naming its window and its
// place in it. The library's way cost the controller, in a profile of
// pushes to 10,000 simulated nodes, 4.1% of its CPU (encoding/json
// decoding each acknowledgement 2.3%, a timer and a future made for each
// publish 0.9%, the futures' channels); this way 1.6% (docs/performance.md,
// "The controller's CPU, cut again"). What is kept of it: an
// acknowledgement or a failure of a remembered send reaches the store as
// it lands (stored, forget), and a publish whose acknowledgement does not
// come within ackWait is settled another way (AppendMany's settle): here
// with one timer a window. One difference: the library failed every
// pending publish as soon as its connection began to reconnect, and a
// window now waits out ackWait for what a reconnect lost (a 300 ms cut in
// a window of 2,000 settled in 2.1-2.3 s against 0.6-0.7), while the
// acknowledgements of what the client held through the reconnect still
// come and count.

// acks routes acknowledgements to the windows in flight.
type acks struct {
	mu  sync.Mutex
	sub *nats.Subscription
	// prefix is the subscription's inbox with its dot: a reply subject is
	// prefix, the window's number, a dot and the message's place.
	prefix  string
	windows map[uint64]*ackWindow
	next    uint64
}

// ackWindow is one window of AppendMany in flight.
type ackWindow struct {
	id   uint64
	msgs []*nats.Msg
	// got holds each message's outcome as it comes; left counts those
	// still to come, and done is closed when none are. Held: acks.mu.
	got  []ackGot
	left int
	done chan struct{}
}

type ackGot struct {
	in  bool
	seq uint64
	err error
}

// ackWindow registers msgs, to be published with the reply subjects it sets.
func (s *Store) ackWindow(msgs []*nats.Msg) (*ackWindow, error) {
	a := &s.acks
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.sub == nil || !a.sub.IsValid() {
		inbox := s.nc.NewInbox()
		sub, err := s.nc.Subscribe(inbox+".>", s.onAck)
		if err != nil {
			return nil, err
		}
		// A push keeps a window of acknowledgements in flight at once;
		// the client's default bounds hold many more.
		a.sub, a.prefix, a.windows = sub, inbox+".", map[uint64]*ackWindow{}
	}
	a.next++
	w := &ackWindow{id: a.next, msgs: msgs, got: make([]ackGot, len(msgs)), left: len(msgs), done: make(chan struct{})}
	base := a.prefix + strconv.FormatUint(w.id, 10) + "."
	for i, m := range msgs {
		if m != nil {
			m.Reply = base + strconv.Itoa(i)
		} else {
			w.got[i].in = true
			w.left--
		}
	}
	if w.left == 0 {
		close(w.done)
		return w, nil
	}
	a.windows[w.id] = w
	return w, nil
}

// ackFailed records that msgs[i] was never published.
func (s *Store) ackFailed(w *ackWindow, i int, err error) {
	s.acks.mu.Lock()
	defer s.acks.mu.Unlock()
	w.take(&s.acks, i, 0, err)
}

// take records message i's outcome, once; the window is done, and no
// longer registered, when every message's has come. Held: a.mu.
func (w *ackWindow) take(a *acks, i int, seq uint64, err error) {
	if i < 0 || i >= len(w.got) || w.got[i].in {
		return
	}
	w.got[i] = ackGot{in: true, seq: seq, err: err}
	if w.left--; w.left == 0 {
		delete(a.windows, w.id)
		close(w.done)
	}
}

// abandon stops waiting for w: what has not come is answered err (and
// forgotten, so the fold reads those sends from the stream). An
// acknowledgement that comes later finds no window and is dropped.
func (s *Store) abandon(w *ackWindow, err error) {
	s.acks.mu.Lock()
	var late []*nats.Msg
	for i := range w.got {
		if !w.got[i].in {
			w.take(&s.acks, i, 0, err) // the last one unregisters w
			late = append(late, w.msgs[i])
		}
	}
	s.acks.mu.Unlock()
	for _, m := range late {
		s.forget(m)
	}
}

// onAck is every acknowledgement of a window's publish, on the
// subscription's goroutine: like the library's handlers, it tells the
// store's memory of sends (stored, forget) before the window's waiter
// hears of it, so the own reader waits on no later one.
func (s *Store) onAck(m *nats.Msg) {
	ack, err := decodeAck(m)
	a := &s.acks
	a.mu.Lock()
	w, i := a.replyTo(m.Subject)
	var sent *nats.Msg
	if w != nil {
		sent = w.msgs[i]
	}
	a.mu.Unlock()
	if sent == nil {
		return // abandoned, or not one of ours
	}
	if err != nil {
		s.forget(sent)
	} else {
		s.stored(sent, &ack)
	}
	a.mu.Lock()
	w.take(a, i, ack.Sequence, err)
	a.mu.Unlock()
}

// replyTo is the window in flight and the place in it that a reply
// subject names, nil when none awaits it. Held: a.mu.
func (a *acks) replyTo(subject string) (*ackWindow, int) {
	rest, ok := strings.CutPrefix(subject, a.prefix)
	win, place, ok2 := strings.Cut(rest, ".")
	id, err1 := strconv.ParseUint(win, 10, 64)
	i, err2 := strconv.Atoi(place)
	if !ok || !ok2 || err1 != nil || err2 != nil {
		return nil, 0
	}
	w := a.windows[id]
	if w == nil || i < 0 || i >= len(w.msgs) || w.got[i].in {
		return nil, 0
	}
	return w, i
}

// decodeAck reads a publish's acknowledgement: the stream's plain answer,
// {"stream":"NAME","seq":N}, by hand; anything else (a duplicate, an
// error, a domain) by encoding/json; a status with no body (no stream
// answers the subject) as the library names it.
func decodeAck(m *nats.Msg) (jetstream.PubAck, error) {
	data := m.Data
	if len(data) == 0 {
		if m.Header.Get("Status") == "503" {
			return jetstream.PubAck{}, jetstream.ErrNoStreamResponse
		}
		return jetstream.PubAck{}, jetstream.ErrInvalidJSAck
	}
	if rest, ok := bytes.CutPrefix(data, []byte(`{"stream":"`)); ok {
		if name, rest, ok := bytes.Cut(rest, []byte(`","seq":`)); ok && plainName(name) {
			if digits, ok := bytes.CutSuffix(rest, []byte("}")); ok && plainNumber(digits) {
				if seq, err := strconv.ParseUint(string(digits), 10, 64); err == nil {
					return jetstream.PubAck{Stream: string(name), Sequence: seq}, nil
				}
			}
		}
	}
	var resp struct {
		jetstream.PubAck
		Error *jetstream.APIError `json:"error,omitempty"`
	}
	if err := json.Unmarshal(data, &resp); err != nil {
		return jetstream.PubAck{}, jetstream.ErrInvalidJSAck
	}
	if resp.Error != nil {
		return jetstream.PubAck{}, resp.Error
	}
	if resp.Stream == "" {
		return jetstream.PubAck{}, jetstream.ErrInvalidJSAck
	}
	return resp.PubAck, nil
}

// plainName is a stream's name as JSON writes it unchanged: printable
// ASCII with no quote or backslash (a stream name has neither), not empty.
// Anything else, encoding/json reads.
func plainName(b []byte) bool {
	for _, c := range b {
		if c <= ' ' || c > '~' || c == '"' || c == '\\' {
			return false
		}
	}
	return len(b) > 0
}

// plainNumber is a sequence as the server writes one: digits, the first
// not 0 (no stored message has sequence 0), at most 20 of them.
func plainNumber(b []byte) bool {
	if len(b) == 0 || len(b) > 20 || b[0] == '0' {
		return false
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// errAckTimeout is a window's publish whose acknowledgement did not come
// within ackWait.
var errAckTimeout = errors.New("store: no acknowledgement of an append came in time")
