package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/meshctl/mesh/declaration"
	"github.com/meshctl/mesh/events"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// One is one decision of one event on one aggregate, for AppendMany.
type One struct {
	Aggregate events.AggregateID
	Expected  uint64
	CommandID string
	Event     events.Event
}

// Outcome is what became of one append: its sequence, or ErrConflict, or
// another error.
type Outcome struct {
	Seq uint64
	Err error
}

// window bounds the checked publishes in flight at once: well under the
// client's pending limit, large enough to keep the server busy.
const window = 2000

// AppendMany appends single-event decisions to distinct aggregates with their
// publishes in flight together: each is checked against its own aggregate's
// expectation, so they cannot contradict each other, and a push to ten
// thousand nodes does not wait ten thousand round trips. Two decisions on one
// aggregate must not be in one call (pipelined expectations on one aggregate
// are not ordered); AppendMany refuses that.
func (s *Store) AppendMany(ctx context.Context, items []One) ([]Outcome, error) {
	seen := make(map[events.AggregateID]bool, len(items))
	for _, it := range items {
		if seen[it.Aggregate] {
			return nil, fmt.Errorf("store: AppendMany was given two decisions on %s; append them one after the other", it.Aggregate)
		}
		seen[it.Aggregate] = true
		if err := events.ValidateCommandID(it.CommandID); err != nil {
			return nil, err
		}
	}
	out := make([]Outcome, len(items))
	now, by := s.Now(), events.ByOf(ctx)
	for start := 0; start < len(items); start += window {
		end := min(start+window, len(items))
		msgs := make([]*nats.Msg, end-start)
		for i := start; i < end; i++ {
			it := items[i]
			m, err := s.message(it.Aggregate, it.CommandID, by, 0, now, it.Event)
			if err != nil {
				out[i].Err = err
				continue
			}
			expect(m, it.Aggregate, it.Expected)
			msgs[i-start] = m
		}
		w, err := s.ackWindow(msgs)
		if err != nil {
			return out, fmt.Errorf("store: cannot hear the bus acknowledge appends: %w", err)
		}
		for i := start; i < end; i++ {
			m := msgs[i-start]
			if m == nil {
				continue
			}
			// Remembered before it is published: the fold may read it
			// back before its acknowledgement comes.
			s.remember(m, items[i].Aggregate, by, now, items[i].Event)
			if err := s.nc.PublishMsg(m); err != nil {
				s.forget(m)
				out[i].Err = fmt.Errorf("store: cannot append to %s: %w", items[i].Aggregate, err)
				s.ackFailed(w, i-start, out[i].Err)
			}
		}
		// One timer a window: an acknowledgement lost (a stream leader
		// gone on a cluster, a bus restarted) is settled another way
		// after ackWait, as the library settled each publish.
		timer := time.NewTimer(ackWait)
		select {
		case <-w.done:
		case <-timer.C:
			s.abandon(w, errAckTimeout)
		case <-ctx.Done():
			timer.Stop()
			s.abandon(w, ctx.Err())
			return out, ctx.Err()
		}
		timer.Stop()
		for i := start; i < end; i++ {
			got := w.got[i-start]
			switch {
			case msgs[i-start] == nil || out[i].Err != nil:
				// Never made, or never published: said already.
			case got.err == nil:
				out[i].Seq = got.seq
			default:
				// Not stored as published (a conflict, a retry's
				// outcome, no answer in time): settled as the
				// library's failures were.
				out[i] = s.settle(ctx, items[i], got.err)
			}
		}
	}
	return out, nil
}

// settle turns a failed pipelined append into its outcome: our own earlier
// write (a retry) is success, another writer's is ErrConflict, one it cannot
// tell is ErrUnsure (the bus gone again), anything else (in flight,
// timeouts) is retried once synchronously through Append.
func (s *Store) settle(ctx context.Context, it One, err error) Outcome {
	if isConflict(err) {
		seq, ok, err := s.landed(ctx, it.Aggregate, events.EventID(it.CommandID, 0))
		switch {
		case err != nil:
			return Outcome{Err: err}
		case ok:
			return Outcome{Seq: seq}
		}
		return Outcome{Err: ErrConflict}
	}
	// Append names the aggregate and the cause (ErrStorage among them).
	seq, err := s.Append(ctx, it.Aggregate, it.Expected, it.CommandID, it.Event)
	return Outcome{Seq: seq, Err: err}
}

// Report publishes an event another party writes (a node's report) under the
// reports prefix: no expectation, since no aggregate's version depends on it,
// and the report id as Msg-Id so a resent report is stored once.
func (s *Store) Report(ctx context.Context, node, reportID string, ev events.Event, by Sealing) (uint64, error) {
	m, err := s.ReportMsg(node, reportID, ev, by)
	if err != nil {
		return 0, err
	}
	ack, err := s.js.PublishMsg(ctx, m)
	if err != nil {
		return 0, fmt.Errorf("store: cannot publish %s's %s: %w", node, ev.EventType(), storageFault(err))
	}
	return ack.Sequence, nil
}

// ReportMsg is the message Report publishes: on the node's own subject for
// the report's type, the report id as its Msg-Id, signed and MAC'd by by.
// The fleet harness pipelines many of them for nodes it plays.
func (s *Store) ReportMsg(node, reportID string, ev events.Event, by Sealing) (*nats.Msg, error) {
	if err := events.ValidateCommandID(reportID); err != nil {
		return nil, err
	}
	data, err := events.Encode(events.NodeAggregate(node), reportID, "", 0, s.Now(), ev)
	if err != nil {
		return nil, err
	}
	if len(data) > events.MaxReport {
		return nil, fmt.Errorf("store: %s's %s of %d bytes is over the %d bytes a report may be", node, ev.EventType(), len(data), events.MaxReport)
	}
	m := nats.NewMsg(events.ReportSubject(node, ev.EventType()))
	m.Data = data
	m.Header.Set(jetstream.MsgIDHeader, events.EventID(reportID, 0))
	m.Header.Set(events.SignerHeader, by.Signer.PublicKey())
	m.Header.Set(events.SignatureHeader, by.Signer.Sign(data))
	m.Header.Set(events.MACHeader, declaration.MAC(by.MAC, m.Subject, data))
	if by.Voucher != "" {
		m.Header.Set(events.VoucherHeader, by.Voucher)
	}
	return m, nil
}

// Sealing is what proves a report's writer (rules 19 and 20): a signature
// of its exact bytes, by the node's agent with its report key (or by the
// controller, for a standing on the operator's word), and a MAC under the
// node's report MAC key (or the controller's log key).
type Sealing struct {
	Signer Signer
	MAC    []byte
	// Voucher, for a module on a node that made its own keys: the node's
	// bus key's signature of the module's (declaration.Voucher).
	Voucher string
}

// Signer signs a message's data; declaration.Signer is one.
type Signer interface {
	PublicKey() string
	Sign(data []byte) string
}

// Last reads the newest message on subject (a direct get), or found false.
func (s *Store) Last(ctx context.Context, subject string) (Msg, bool, error) {
	if s.stream == nil {
		return s.lastDirect(ctx, subject)
	}
	m, err := retry(ctx, func() (*jetstream.RawStreamMsg, error) { return s.stream.GetLastMsgForSubject(ctx, subject) })
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return Msg{}, false, nil
	}
	if err != nil {
		return Msg{}, false, fmt.Errorf("store: cannot read the last message on %s: %w", subject, err)
	}
	return s.got(m), true, nil
}

// Next reads the first message on subject at or after sequence from (a
// direct get), or found false: one request, where a read of a filter from
// the stream's start makes a consumer, and on a stream of ten million
// events its removal once took two seconds of a controller's start.
func (s *Store) Next(ctx context.Context, subject string, from uint64) (Msg, bool, error) {
	if err := s.needsStream("read an event of"); err != nil {
		return Msg{}, false, err
	}
	m, err := retry(ctx, func() (*jetstream.RawStreamMsg, error) {
		return s.stream.GetMsg(ctx, from, jetstream.WithGetMsgSubject(subject))
	})
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return Msg{}, false, nil
	}
	if err != nil {
		return Msg{}, false, fmt.Errorf("store: cannot read the first message on %s from event %d: %w", subject, from, err)
	}
	return s.got(m), true, nil
}

// Get reads the message at seq (a direct get): for reading one event whose
// sequence an index holds, without replaying anything.
func (s *Store) Get(ctx context.Context, seq uint64) (Msg, error) {
	if err := s.needsStream("read an event of"); err != nil {
		return Msg{}, err
	}
	m, err := retry(ctx, func() (*jetstream.RawStreamMsg, error) { return s.stream.GetMsg(ctx, seq) })
	if err != nil {
		return Msg{}, fmt.Errorf("store: cannot read event %d: %w", seq, err)
	}
	return s.got(m), nil
}

// lastDirect is Last by the direct get API itself, for a store without the
// stream's information (AttachNode): the subject asked for is part of the
// request's subject, which is what a closed bus grants a node.
func (s *Store) lastDirect(ctx context.Context, subject string) (Msg, bool, error) {
	// Bounded whatever ctx is (an agent's Run has no deadline): a bus
	// killed after taking the request never answers, and without the
	// bound the agent waited there for ever, connected and deaf.
	ctx, cancel := s.bound(ctx)
	defer cancel()
	resp, err := s.nc.RequestWithContext(ctx, "$JS.API.DIRECT.GET."+s.name+"."+subject, nil)
	if errors.Is(err, nats.ErrNoResponders) {
		return Msg{}, false, fmt.Errorf("store: the bus has no stream %s yet; start the controller (mesh up or mesh serve) once to create it", s.name)
	}
	if err != nil {
		return Msg{}, false, fmt.Errorf("store: cannot read the last message on %s: %w", subject, err)
	}
	switch status := resp.Header.Get("Status"); status {
	case "":
	case "404":
		return Msg{}, false, nil
	default:
		return Msg{}, false, fmt.Errorf("store: cannot read the last message on %s: %s %s", subject, status, resp.Header.Get("Description"))
	}
	m, err := directMsg(resp)
	if err != nil {
		return Msg{}, false, fmt.Errorf("store: the last message on %s came without its sequence", subject)
	}
	return m, true, nil
}

// Republished is the stored message the stream republished (its
// RePublish: events.StoredPrefix), in the shape Last answers: its place
// in the stream is in the same headers a direct get's answer has.
func Republished(m *nats.Msg) (Msg, error) {
	if m.Header == nil {
		return Msg{}, errors.New("store: a republished message came without its headers")
	}
	out, err := directMsg(m)
	if err != nil {
		return Msg{}, fmt.Errorf("store: a republished message came without its sequence: %w", err)
	}
	return out, nil
}

// directMsg is the stored message a direct get answered (or the controller,
// in the same shape: Newest): its place in the stream is in the headers.
//
// The server appends its own headers after those the message was stored
// with, which its writer chose: a node can store a report carrying a
// Nats-Subject of a controller's send, or a time of its choosing. So each
// is the header's last value, the server's, never the first: read first,
// a forged report reached the live fold as a send (a review's test, 12
// reports in 200, when the fold read its gaps so), and would reach an
// agent hearing its declaration so.
func directMsg(resp *nats.Msg) (Msg, error) {
	seq, err := strconv.ParseUint(serverHeader(resp.Header, jetstream.SequenceHeader), 10, 64)
	if err != nil {
		return Msg{}, err
	}
	at, _ := time.Parse(time.RFC3339Nano, serverHeader(resp.Header, jetstream.TimeStampHeaer))
	if !at.IsZero() {
		// In the zone a consumer's delivery has (nats.go's time.Unix): a
		// foreign row keeps a message's time, and verify compares a fold
		// by a read with rows folded from gets byte for byte.
		at = time.Unix(0, at.UnixNano())
	}
	return Msg{Seq: seq, Subject: serverHeader(resp.Header, jetstream.SubjectHeader), Data: resp.Data, Header: resp.Header, Time: at}, nil
}

// got is a message a get of the stream answered, as the server stored it.
// nats.go reads a direct get's place from each header's first value, which
// the message's writer may have set (directMsg); on a stream that answers
// by direct gets (the mesh's asserts it) the server's is the last.
func (s *Store) got(m *jetstream.RawStreamMsg) Msg {
	out := Msg{Seq: m.Sequence, Subject: m.Subject, Data: m.Data, Header: m.Header, Time: m.Time}
	if info := s.stream.CachedInfo(); info == nil || !info.Config.AllowDirect || m.Header == nil {
		return out // answered by the API, whose fields are the server's alone
	}
	if d, err := directMsg(&nats.Msg{Header: m.Header, Data: m.Data}); err == nil {
		out.Seq, out.Subject = d.Seq, d.Subject
		if !d.Time.IsZero() {
			out.Time = d.Time
		}
	}
	return out
}

// serverHeader is the last value of header key: the one the server
// appended (directMsg).
func serverHeader(h nats.Header, key string) string {
	v := h.Values(key)
	if len(v) == 0 {
		return ""
	}
	return v[len(v)-1]
}
