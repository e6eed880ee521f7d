package fleet

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/meshctl/mesh/compose"
	"github.com/meshctl/mesh/declaration"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/events/store"
	"github.com/meshctl/mesh/fanout"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"
)

// Traffic writes a long stream of the traffic a busy mesh makes, fast
// enough to measure what a stream of ten million events costs (issue 34: a
// controller starting from a snapshot of one). A push through the
// controller to simulated nodes costs a hundred thousand nodes 35 s to
// nearly 3 min on two shared cores; this writes the same events without
// composing: each node's enrolment, its report key, then rounds of a
// declaration sent (real signed bytes of about 1.4 KB, signed by the
// controller key, appended through AppendMany expecting the node's
// version, as a push appends) and the node's report applying it (signed by
// the node's own report key and MAC'd as the node's, as an agent reports).
// The controller folds them as any others: nothing here is a fake of the
// log. It needs the controller's key (the mesh's own home), and an open
// bus, since every node's reports go out on one connection.

// TrafficConfig says how much to write.
type TrafficConfig struct {
	Nodes  int    // how many nodes (enrolled once, if the stream has none of that name)
	Events uint64 // about how many events to write in all
	Prefix string // nodes are named PREFIX-000000 on
	// Progress, when set, is told the events written so far after each
	// round of nodes.
	Progress func(written uint64)
}

// trafficWindow is how many nodes' events are built (signed, on every
// core) and then appended together: AppendMany keeps 2,000 in flight.
const trafficWindow = 10_000

// Traffic appends cfg's events to st (whose MAC must be the controller's
// log key) as the controller kp and the nodes it enrolls would, and
// answers how many it wrote.
func Traffic(ctx context.Context, nc *nats.Conn, st *store.Store, kp nkeys.KeyPair, cfg TrafficConfig) (uint64, error) {
	if cfg.Nodes <= 0 || cfg.Events == 0 {
		return 0, fmt.Errorf("fleet: traffic needs nodes and events, was given %d node(s) and %d event(s)", cfg.Nodes, cfg.Events)
	}
	keys, err := declaration.NewKeyring(kp)
	if err != nil {
		return 0, err
	}
	signer, err := declaration.NewSigner(kp)
	if err != nil {
		return 0, err
	}
	// Reports wait for their acks as long as an append may: on a loaded
	// bus the client's default (5 s) cut a run of ten million short.
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(asyncWindow), jetstream.WithPublishAsyncTimeout(reportWait))
	if err != nil {
		return 0, err
	}
	names := make([]string, cfg.Nodes)
	sealings := make([]store.Sealing, cfg.Nodes)
	var once sync.Once
	var first error
	fanout.PerCore(cfg.Nodes, func(i int) {
		names[i] = fmt.Sprintf("%s-%06d", cfg.Prefix, i)
		k, err := nkeys.CreateUser()
		if err == nil {
			var s *declaration.Signer
			s, err = declaration.NewSigner(k)
			sealings[i] = store.Sealing{Signer: s, MAC: keys.NodeMAC(names[i])}
		}
		if err != nil {
			once.Do(func() { first = err })
		}
	})
	if first != nil {
		return 0, first
	}
	t := &traffic{st: st, js: js, cfg: cfg, names: names, sealings: sealings, signer: signer,
		last: make([]uint64, cfg.Nodes), seqs: make([]uint64, cfg.Nodes), digests: make([]string, cfg.Nodes)}
	if err := t.resume(ctx); err != nil {
		return 0, err
	}
	if err := t.enrol(ctx); err != nil {
		return t.written, err
	}
	for t.written < cfg.Events {
		for lo := 0; lo < cfg.Nodes && t.written < cfg.Events; lo += trafficWindow {
			if err := t.push(ctx, lo, min(lo+trafficWindow, cfg.Nodes)); err != nil {
				return t.written, err
			}
		}
	}
	return t.written, t.settle(ctx)
}

type traffic struct {
	st       *store.Store
	js       jetstream.JetStream
	cfg      TrafficConfig
	names    []string
	sealings []store.Sealing
	last     []uint64 // each node's aggregate version: the sequence of its last event (0: not enrolled)
	seqs     []uint64 // each node's last declaration's number
	digests  []string // each node's last declaration's digest, its chain
	signer   *declaration.Signer
	written  uint64
	acks     []pendingAck // reports published and not yet known taken
}

// resume reads what the stream holds of each node already (a run cut
// short, or a second run to make the stream longer): its version, and its
// last declaration's number and digest, which the next one follows.
func (t *traffic) resume(ctx context.Context) error {
	var once sync.Once
	var first error
	fanout.Each(len(t.names), 64, func(i int) {
		agg := events.NodeAggregate(t.names[i])
		m, found, err := t.st.Last(ctx, agg.Subject(events.DeclarationSent{}.EventType()))
		if err == nil && found {
			var ev events.Event
			if _, ev, err = events.DecodeFromSubject(m.Subject, m.Data); err == nil {
				sent := ev.(events.DeclarationSent)
				t.last[i], t.seqs[i], t.digests[i] = m.Seq, sent.Sequence, sent.Digest
				return
			}
		}
		if err == nil {
			m, found, err = t.st.Last(ctx, agg.Subject(events.NodeEnrolled{}.EventType()))
			if found {
				t.last[i] = m.Seq
			}
		}
		if err != nil {
			once.Do(func() { first = err })
		}
	})
	return first
}

// enrol appends the enrolment of each node not enrolled yet, and a report
// key for each (a node of a run before gets a new one, as a node re-keyed).
func (t *traffic) enrol(ctx context.Context) error {
	for lo := 0; lo < len(t.names); lo += trafficWindow {
		hi := min(lo+trafficWindow, len(t.names))
		items := make([]store.One, 0, hi-lo)
		for i := lo; i < hi; i++ {
			if t.last[i] == 0 {
				items = append(items, store.One{Aggregate: events.NodeAggregate(t.names[i]), CommandID: "traffic.enrol." + t.names[i],
					Event: events.NodeEnrolled{Name: t.names[i], Capabilities: []string{"linux"}, Labels: map[string]string{"fleet": t.cfg.Prefix}}})
			}
		}
		if err := t.appendTo(ctx, lo, hi, items); err != nil {
			return err
		}
		if err := t.report(ctx, lo, hi, func(i int) (string, events.Event) {
			key := t.sealings[i].Signer.PublicKey()
			return "key." + key[:20], events.ReportKeyRecorded{Node: t.names[i], Key: key}
		}); err != nil {
			return err
		}
	}
	return nil
}

// trafficContent is what each node is declared: one module's file of some
// forty lines, about the size of a real declaration of a few files.
var trafficContent = strings.Repeat("some configuration line of a module's file\n", 20)

// push sends nodes lo to hi each its next declaration and appends each
// one's report applying it.
func (t *traffic) push(ctx context.Context, lo, hi int) error {
	items := make([]store.One, hi-lo)
	at := time.Now()
	fanout.PerCore(hi-lo, func(j int) {
		i := lo + j
		content := compose.Declaration{Mesh: "mesh", Node: t.names[i], Receives: []compose.Receipt{},
			Modules:   []compose.ModuleBuild{{Module: "motd", Build: strings.Repeat("b", 64)}},
			Resources: []compose.Resource{{Path: "/etc/motd", Kind: "file", Mode: "0644", Content: &trafficContent, Module: "motd"}}}
		t.seqs[i]++
		d := declaration.New(content, t.seqs[i], t.digests[i], at)
		s := t.signer.Seal(d)
		t.digests[i] = s.Digest()
		items[j] = store.One{Aggregate: events.NodeAggregate(t.names[i]), Expected: t.last[i],
			CommandID: "traffic.send." + strconv.FormatUint(t.seqs[i], 10) + "." + t.names[i],
			Event: events.DeclarationSent{Node: t.names[i], Sequence: t.seqs[i], Digest: t.digests[i], ContentDigest: d.ContentDigest(),
				By: "push", Resources: 1, Declaration: s.Bytes, Signature: s.Signature, Key: s.Key}}
	})
	if err := t.appendTo(ctx, lo, hi, items); err != nil {
		return err
	}
	return t.report(ctx, lo, hi, func(i int) (string, events.Event) {
		return "rep.a." + strconv.FormatUint(t.seqs[i], 10) + "." + t.digests[i][:16],
			events.DeclarationApplied{Node: t.names[i], Sequence: t.seqs[i], Digest: t.digests[i], Changed: 1}
	})
}

// appendTo appends items, each of one of the nodes lo to hi in order and
// expecting its node's version, and records the versions they made.
func (t *traffic) appendTo(ctx context.Context, lo, hi int, items []store.One) error {
	out, err := t.st.AppendMany(ctx, items)
	if err != nil {
		return err
	}
	at := make(map[events.AggregateID]int, hi-lo)
	for i := lo; i < hi; i++ {
		at[events.NodeAggregate(t.names[i])] = i
	}
	for j, o := range out {
		i := at[items[j].Aggregate]
		if o.Err != nil {
			return fmt.Errorf("fleet: cannot append %s's %s: %w", t.names[i], items[j].Event.EventType(), o.Err)
		}
		t.last[i] = o.Seq
	}
	t.written += uint64(len(items))
	t.progress()
	return nil
}

// report publishes the report of each node lo to hi that made gives, as
// the node would (signed on every core), and waits for the bus to take
// them all.
func (t *traffic) report(ctx context.Context, lo, hi int, made func(i int) (string, events.Event)) error {
	var once sync.Once
	var first error
	msgs := make([]*nats.Msg, hi-lo)
	fanout.PerCore(hi-lo, func(j int) {
		id, ev := made(lo + j)
		m, err := t.st.ReportMsg(t.names[lo+j], id, ev, t.sealings[lo+j])
		if err != nil {
			once.Do(func() { first = err })
		}
		msgs[j] = m
	})
	if first != nil {
		return first
	}
	// The last window's reports are awaited only now: their acks come
	// back while this window was signed and appended.
	if err := t.settle(ctx); err != nil {
		return err
	}
	for j, m := range msgs {
		a, err := t.js.PublishMsgAsync(m, jetstream.WithStallWait(time.Minute))
		if err != nil {
			return fmt.Errorf("fleet: cannot publish %s's report: %w", t.names[lo+j], err)
		}
		t.acks = append(t.acks, pendingAck{a, t.names[lo+j]})
	}
	t.written += uint64(hi - lo)
	t.progress()
	return nil
}

// settle waits for every report in flight to be taken by the bus.
func (t *traffic) settle(ctx context.Context) error {
	defer func() { t.acks = t.acks[:0] }()
	for _, a := range t.acks {
		select {
		case <-a.Ok():
		case err := <-a.Err():
			return fmt.Errorf("fleet: the bus did not take %s's report: %w", a.node, err)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

type pendingAck struct {
	jetstream.PubAckFuture
	node string
}

func (t *traffic) progress() {
	if t.cfg.Progress != nil {
		t.cfg.Progress(t.written)
	}
}
