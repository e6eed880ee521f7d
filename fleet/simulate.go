package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"time"

	"github.com/meshctl/mesh/agent"
	"github.com/meshctl/mesh/declaration"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/events/store"
	"github.com/meshctl/mesh/fanout"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"
)

// Simulate plays many nodes' agents on one connection, for fleets larger
// than one machine's processes can run as real agents (a hundred thousand):
// for each declaration sent to one of its nodes, it appends the report an
// agent that applied it would, signed by the node's own report key (which
// it records first, as an agent does) and MAC'd with the key the node's
// join string gives, and counts it once the bus acknowledges it. It applies
// nothing and checks no signature: it measures what a fleet of that size
// costs the controller and the bus, not the agents. (It hears what was
// sent where the stream republishes it, as agents do, but by one
// subscription to every node's subject; unlike an agent it never reads
// its newest declaration back, so what is republished while its
// connection is down is not heard, and that push is never all reported:
// it warns when its connection drops.)
// It needs an open bus (mesh serve without
// --closed): on a closed one, a node's reports are its own identity's to
// publish.
func Simulate(ctx context.Context, nc *nats.Conn, joins []agent.Join) (*Fleet, error) {
	f := &Fleet{byNode: map[string]*member{}, changed: make(chan struct{}, 1)}
	sealings := make([]store.Sealing, len(joins))
	for _, j := range joins {
		if f.byNode[j.Node] != nil {
			return nil, fmt.Errorf("fleet: node %s is given twice", j.Node)
		}
		m := &member{node: j.Node}
		m.follows.Store(true)
		f.members = append(f.members, m)
		f.byNode[j.Node] = m
	}
	// A report key per node, made as an agent makes its own.
	var firstErr error
	var once sync.Once
	fanout.PerCore(len(joins), func(i int) {
		s, err := simSealing(joins[i])
		if err != nil {
			once.Do(func() { firstErr = err })
		}
		sealings[i] = s
	})
	if firstErr != nil {
		return nil, firstErr
	}
	bySealing := make(map[string]store.Sealing, len(joins))
	for i, j := range joins {
		bySealing[j.Node] = sealings[i]
	}
	// One store: it reports as each node.
	st, err := store.Attach(ctx, nc, "")
	if err != nil {
		return nil, err
	}
	// Record every report key before any report: the fold believes a
	// report only under the key its node recorded.
	var fail error
	var failOnce sync.Once
	fanout.Each(len(joins), 64, func(i int) {
		j := joins[i]
		ev := events.ReportKeyRecorded{Node: j.Node, Key: sealings[i].Signer.PublicKey()}
		if _, err := st.Report(ctx, j.Node, "key."+ev.Key[:20], ev, sealings[i]); err != nil {
			failOnce.Do(func() { fail = err })
		}
	})
	if fail != nil {
		return nil, fmt.Errorf("fleet: cannot record the simulated nodes' report keys (%w); a simulated fleet publishes every node's reports on one connection, which only an open bus allows: run it against mesh serve without --closed", fail)
	}
	// Every declaration sent to any node, heard where the stream
	// republishes each once stored (events.StoredPrefix), as a real
	// agent hears its own: an ordered consumer of the harness's own
	// beside it was a delivery a node more than a real fleet asks of
	// the bus, and its filter skipped every report on the way (issue
	// 34). The subscription's buffer is unbounded: the client's
	// default dropped a hundred thousand declarations sent at once as
	// a slow consumer, and a declaration dropped is a push never all
	// reported. Handed to workers that each publish a report and wait
	// for its acknowledgement, as an agent does; the client keeps what
	// arrives while every answerer is busy.
	work := make(chan []byte, 4096)
	runCtx, cancel := context.WithCancel(context.Background())
	f.cancel = cancel
	sub, err := nc.Subscribe(events.StoredPrefix+".>", func(m *nats.Msg) {
		select {
		case work <- m.Data:
		case <-runCtx.Done():
		}
	})
	if err == nil {
		if err = sub.SetPendingLimits(-1, -1); err == nil {
			err = nc.Flush()
		}
		if err != nil {
			_ = sub.Unsubscribe()
		}
	}
	if err != nil {
		cancel()
		return nil, fmt.Errorf("fleet: cannot hear the declarations the stream republishes: %w", err)
	}
	// What the stream republishes while the connection is down is not
	// heard: an agent reads its newest declaration back once it is
	// connected again, this harness does not. Said as a warning, so that
	// a push then never all reported does not wait in silence.
	dropped := nc.StatusChanged(nats.RECONNECTING)
	f.running.Go(func() {
		defer nc.RemoveStatusListener(dropped)
		defer sub.Unsubscribe()
		for {
			select {
			case <-dropped:
				f.warnings.note("the simulated fleet's connection to the bus dropped: what the stream republished until it was back was not heard, and a push sent meanwhile is never all reported")
			case <-runCtx.Done():
				return
			}
		}
	})
	// Each simulated node says it is alive as an agent does (issue 28),
	// or the controller would call the whole fleet unreachable.
	f.running.Go(func() { beatAll(runCtx, nc, joins, sealings) })
	// Reports are published asynchronously and their acknowledgements
	// awaited in order by one goroutine, as a hundred thousand agents each
	// waiting on its own would: publishing one at a time and waiting for
	// each ack cost the harness and the bus a round trip a report (a
	// hundred thousand flushes a push on each side).
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(asyncWindow), jetstream.WithPublishAsyncTimeout(reportWait))
	if err != nil {
		cancel()
		return nil, err
	}
	acks := make(chan pendingReport, asyncWindow)
	f.running.Go(func() {
		// Two answerers a core, each taking declarations until the fleet
		// stops: an answer waits on the bus about as long as it computes.
		// acks closes only once every answerer is done, or one would
		// send on a closed channel.
		answerers := 2 * runtime.GOMAXPROCS(0)
		fanout.Each(answerers, answerers, func(int) {
			for {
				select {
				case data := <-work:
					f.answer(runCtx, st, js, bySealing, data, acks)
				case <-runCtx.Done():
					return
				}
			}
		})
		close(acks)
	})
	f.running.Go(func() { f.awaitAcks(runCtx, acks) })
	return f, nil
}

// asyncWindow is how many simulated reports may await their ack at once,
// stallWait how long one publish waits for room before trying again, and
// reportWait how long a report waits for its ack. (Variables: a test makes
// the window small enough to fill and the wait short enough to run out.)
var (
	asyncWindow = 4096
	stallWait   = time.Second
)

const reportWait = 30 * time.Second

// pendingReport is a report published and not yet acknowledged.
type pendingReport struct {
	ack    jetstream.PubAckFuture
	member *member
	report events.DeclarationApplied
}

// sentHead is the part of a DeclarationSent a simulated agent answers
// from. Decoding only it skips the sealed declaration's base64, which was
// a fifth of the harness's time.
type sentHead struct {
	Data struct {
		Node      string `json:"node"`
		Sequence  uint64 `json:"sequence"`
		Digest    string `json:"digest"`
		Resources int    `json:"resources"`
	} `json:"data"`
}

// answer publishes the report applying the declaration data carries would
// make, as its node would, and hands it to awaitAcks.
func (f *Fleet) answer(ctx context.Context, st *store.Store, js jetstream.JetStream, sealings map[string]store.Sealing, data []byte, acks chan<- pendingReport) {
	var head sentHead
	if err := json.Unmarshal(data, &head); err != nil {
		return // not a declaration a node of this fleet could read
	}
	sent := head.Data
	m := f.byNode[sent.Node]
	if m == nil || sent.Digest == "" {
		return // not for a node this fleet plays
	}
	report := events.DeclarationApplied{Node: sent.Node, Sequence: sent.Sequence, Digest: sent.Digest, Changed: sent.Resources}
	id := "rep.a." + strconv.FormatUint(sent.Sequence, 10) + "." + sent.Digest[:min(16, len(sent.Digest))]
	msg, err := st.ReportMsg(sent.Node, id, report, sealings[sent.Node])
	if err != nil {
		f.warnings.note(sent.Node + ": " + err.Error())
		return
	}
	// A full window is waited out, as an agent waits for its ack: the
	// client gives up on room after stallWait, and a report dropped there
	// would be lost to the measure (the push would never be all reported).
	for ctx.Err() == nil {
		ack, err := js.PublishMsgAsync(msg, jetstream.WithStallWait(stallWait))
		if errors.Is(err, jetstream.ErrTooManyStalledMsgs) {
			continue
		}
		if err != nil {
			f.warnings.note(sent.Node + ": " + err.Error())
			return
		}
		select {
		case acks <- pendingReport{ack: ack, member: m, report: report}:
		case <-ctx.Done():
		}
		return
	}
}

// awaitAcks observes each report once the bus has stored it, as an agent
// that waits for its publish's acknowledgement does.
func (f *Fleet) awaitAcks(ctx context.Context, acks <-chan pendingReport) {
	for p := range acks {
		select {
		case <-p.ack.Ok():
			f.observe(p.member, agent.Observation{Report: p.report, Sent: true})
		case err := <-p.ack.Err():
			f.warnings.note(p.report.Node + ": " + err.Error())
		case <-ctx.Done():
			return
		}
	}
}

func simSealing(j agent.Join) (store.Sealing, error) {
	bus, err := nkeys.FromSeed([]byte(j.Seed))
	if err != nil {
		return store.Sealing{}, fmt.Errorf("fleet: %s's join string has no node key: a simulated fleet needs the identities of a mesh that makes them", j.Node)
	}
	mac, err := declaration.ReportMACKey(bus)
	if err != nil {
		return store.Sealing{}, err
	}
	kp, err := nkeys.CreateUser()
	if err != nil {
		return store.Sealing{}, err
	}
	signer, err := declaration.NewSigner(kp)
	return store.Sealing{Signer: signer, MAC: mac}, err
}

// beatAll says every node of joins is alive once every events.LiveEvery,
// spread over the interval as agents started at different moments are: a
// hundred thousand beats at once would be a burst the controller's
// subscription must buffer.
func beatAll(ctx context.Context, nc *nats.Conn, joins []agent.Join, sealings []store.Sealing) {
	if len(joins) == 0 {
		return
	}
	const slices = 50
	t := time.NewTicker(events.LiveEvery / slices)
	defer t.Stop()
	for i := 0; ; i = (i + 1) % slices {
		now := time.Now()
		for j := i; j < len(joins); j += slices {
			subject := events.LivenessSubject(joins[j].Node)
			_ = nc.Publish(subject, declaration.Beat(sealings[j].MAC, subject, now))
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
