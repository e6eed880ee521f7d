package store

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Msg is one stream message as replay sees it: raw, so that a reader decides
// what an undecodable message means for it (a fold stops; mesh events shows it).
type Msg struct {
	Seq     uint64
	Subject string
	Data    []byte
	Header  nats.Header
	Time    time.Time
	// Pending is how many messages follow this one in the stream right now:
	// 0 means the reader has caught up.
	Pending uint64
	// Known, when set, is what this store knows of the message because it
	// appended exactly these bytes itself (known.go): what decoding them
	// answers, which the fold then need not work out again.
	Known *Known
}

// ReadOptions say where a replay starts and whether it ends.
type ReadOptions struct {
	From   uint64 // first sequence to deliver; 0 or 1 is the start of the stream
	Follow bool   // keep delivering new messages until ctx ends
	Filter string // only messages on this subject (wildcards allowed); "" for all
	// Filters, when set, reads the messages on any of these subjects
	// instead of Filter, in stream order.
	Filters []string
	// Until, without Follow, ends the read once the message at this
	// sequence (or the last before it) has been delivered; 0: the end.
	Until uint64
	// Own, with Follow and no filter, on a store that remembers its sends
	// (RememberSends): each send this store appended is handed over from
	// memory once the stream has acknowledged storing it, in its place in
	// stream order, rather than delivered by the bus again (own.go). The
	// live fold reads so.
	Own bool
	// Wanted, for an Own read, answers the lowest sequence someone waits
	// to see read (math.MaxUint64 when nobody does), and Asked is poked
	// when someone starts to wait: a message the consumer leaves out and
	// memory does not hold, last in the stream, is read for them.
	Wanted func() uint64
	Asked  <-chan struct{}
	// Idle, for an Own read, is called on the read's own turn (never
	// beside fn) when it has handed nothing on for a whole look at the
	// stream's end (ownTail): a reader holding a message said to have
	// more after it hands it on then, should the count have been high.
	Idle func()
}

// readBytes is how many bytes of messages the ordered consumer asks for at
// a time. A bound in bytes, not in messages: 5,000 messages at a time
// (~680k msgs/s of the mesh's small events on 2 cores, against ~400k with
// nats.go's default 500) were 300 MB when a node filled its reports with
// 60 KB of junk, more than the bus holds for one connection before it cuts
// it as a slow consumer, which took the controller's service off the bus
// with it: one second of such a flood made every verify fail. 8 MiB holds
// 8 events of the largest size (1 MiB) and tens of thousands of ordinary ones.
const readBytes = 8 << 20

// Read delivers messages in stream order to fn, from o.From on, one at a
// time, and never after it has returned. Without
// Follow it returns once it has delivered the last message the stream held
// when it started (at once when there is none). It stops at the first error
// fn returns, and returns it; with Follow it returns ctx's error when ctx ends.
func (s *Store) Read(ctx context.Context, o ReadOptions, fn func(Msg) error) error {
	filters := o.Filters
	if len(filters) == 0 && o.Filter != "" {
		filters = []string{o.Filter}
	}
	if o.Own && o.Follow && len(filters) == 0 && s.RememberSends && s.stream != nil {
		return s.readOwn(ctx, o, fn)
	}
	var matched uint64 // the last message known to match, up to Until (below)
	if !o.Follow {
		// What a filter holds ends at its last message (by direct get).
		// The read ends at the stream's last sequence as its leader says,
		// when this store has the stream: a direct get may come from a
		// replica still catching up, and a read ending there would end
		// short. A node's store has no stream handle (rule 18).
		var last uint64
		if len(filters) == 0 {
			st, err := s.State(ctx)
			if err != nil {
				return err
			}
			last = st.LastSeq
		}
		for _, f := range filters {
			l, err := s.lastFor(ctx, f)
			if err != nil {
				return err
			}
			last = max(last, l)
		}
		if last == 0 || last < o.From {
			return nil // nothing matches from there: no message would come
		}
		// The last message this read must deliver: one known to match,
		// not merely the stream's end. The consumer's "nothing pending"
		// alone ends a read only past it: on a cluster the consumer's
		// server may not have applied the newest messages yet, and its
		// nothing pending then meant a read of the whole stream ended one
		// short of what its leader had acknowledged
		// (TestClusterLeaderLossLosesNoAcknowledgedEvent, once in CI).
		matched = last
		if o.Until > 0 {
			matched = min(matched, o.Until)
		}
		if len(filters) > 0 && s.stream != nil {
			st, err := s.State(ctx)
			if err != nil {
				return err
			}
			last = max(last, st.LastSeq)
		}
		if o.Until > 0 && o.Until < last {
			last = o.Until
		}
		o.Until = last
	}
	cfg := jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverAllPolicy}
	if o.From > 1 {
		cfg = jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: o.From}
	}
	cfg.FilterSubjects = filters
	cons, err := retry(ctx, func() (jetstream.Consumer, error) { return s.js.OrderedConsumer(ctx, s.name, cfg) })
	if err != nil {
		return fmt.Errorf("store: cannot read stream %s: %w", s.name, err)
	}
	var (
		end = newEnding()
		// mu is held while fn runs; stopped, set under it when Read returns,
		// guarantees fn is never called after Read has returned (the
		// consumer's own Stop does not wait for a callback in flight).
		mu      sync.Mutex
		stopped bool
	)
	finish := end.finish
	cc, err := cons.Consume(func(m jetstream.Msg) {
		mu.Lock()
		defer mu.Unlock()
		if stopped {
			return
		}
		md, err := m.Metadata()
		if err != nil {
			stopped = true
			finish(fmt.Errorf("store: message on %s has no metadata: %w", m.Subject(), err))
			return
		}
		msg := Msg{Seq: md.Sequence.Stream, Subject: m.Subject(), Data: m.Data(), Header: m.Headers(),
			Time: md.Timestamp, Pending: md.NumPending}
		if !o.Follow && msg.Seq > o.Until {
			// Past the end asked for (the next matching message came after it).
			stopped = true
			finish(nil)
			return
		}
		msg.Known = s.recall(msg)
		if !o.Follow && msg.Seq == o.Until {
			msg.Pending = 0 // the last this read delivers: a folder commits on it
		}
		if err := fn(msg); err != nil {
			stopped = true
			finish(err)
			return
		}
		if !o.Follow && (md.NumPending == 0 && msg.Seq >= matched || msg.Seq >= o.Until) {
			stopped = true
			finish(nil)
		}
	}, jetstream.PullMaxBytes(readBytes))
	if err != nil {
		return fmt.Errorf("store: cannot read stream %s: %w", s.name, err)
	}
	defer func() {
		cc.Stop()
		mu.Lock()
		stopped = true
		mu.Unlock()
		s.deleteConsumer(cons)
	}()
	select {
	case <-end.done:
		return end.result
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ending is how a read ends: at the first of its outcomes, kept.
type ending struct {
	once   sync.Once
	done   chan struct{}
	result error
}

func newEnding() *ending { return &ending{done: make(chan struct{})} }

// finish ends the read with err, unless it has ended already.
func (e *ending) finish(err error) {
	e.once.Do(func() { e.result = err; close(e.done) })
}

// lastFor is the sequence of the newest message matching filter (the whole
// stream for ""), 0 when there is none.
func (s *Store) lastFor(ctx context.Context, filter string) (uint64, error) {
	if filter == "" {
		st, err := s.State(ctx)
		return st.LastSeq, err
	}
	m, found, err := s.Last(ctx, filter)
	if err != nil || !found {
		return 0, err
	}
	return m.Seq, nil
}

// deleteConsumer removes a finished read's consumer from the server.
// Stopping an ordered consumer only stops pulling: the server keeps it
// until five minutes without a pull, so every audit, verify, rebuild and
// as-of fold left one behind, and a thousand within five minutes would
// have refused the next read (the stream's consumer limit, issue 13). It
// is best effort: on a lost connection the server's own expiry does it.
func (s *Store) deleteConsumer(cons jetstream.Consumer) {
	info := cons.CachedInfo()
	if info == nil || !s.nc.IsConnected() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), consumerDeleteWait)
	defer cancel()
	_ = s.js.DeleteConsumer(ctx, s.name, info.Name)
}

// consumerDeleteWait bounds how long a finished read waits to remove its
// consumer: a round trip, and on a cluster the stream leader's vote.
const consumerDeleteWait = 2 * time.Second
