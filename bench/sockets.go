package bench

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/meshctl/mesh/events"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The floor of a real agent's sockets: what the bus spends per agent when
// each of N agents is a connection of its own (the declaration it is told
// delivered to it, its report read from it and the acknowledgement written
// back), against the same N exchanges over one shared connection as the
// simulated fleet makes them. Raw JetStream, no mesh: the difference is
// the price of a socket an agent, which no change to the mesh can take
// away, and what the real agents' row is fairly held against.

// Sockets are the CPU a message exchange costs (a declaration stored and
// delivered, a report stored, acknowledged and read), the least of the
// rounds: the bus's, and the hub's, which plays the controller (it
// publishes the declarations and reads every report, as the fold does).
type Sockets struct {
	// Own is the bus's per agent, each agent on a connection of its own,
	// told by the stream's republish and reporting with a publish it
	// waits on, each answering at a random moment within Span (the
	// reports' span of the run's real agents: each message then arrives
	// alone, and the bus wakes for each, where reports arriving together
	// share its work).
	Own  time.Duration
	Span time.Duration
	// Burst is the same with every agent answering at once.
	Burst time.Duration
	// Shared is the same exchange over one connection, as the simulated
	// fleet makes it: the declarations heard by one subscription to their
	// republish, the reports published asynchronously.
	Shared time.Duration
	// HubOwn, HubBurst and HubShared are the hub's, in the same rounds.
	HubOwn, HubBurst, HubShared time.Duration
}

// Price is what a socket of its own costs an agent and a push, the bus
// and the hub together: its exchange within the span less the shared one.
func (s Sockets) Price() time.Duration {
	return max(s.Own-s.Shared, 0) + max(s.HubOwn-s.HubShared, 0)
}

// The socket floor's stream: a declaration on sk.d.KIND.N, republished once
// stored to sk.told.KIND.N as the mesh's stream republishes to its
// node's agent, and its report on sk.r.KIND.N.
const SocketStream = "SOCKETS"

// SocketStreamConfig is that stream, as the mesh's own is kept: on disk,
// republishing every declaration once stored.
func SocketStreamConfig() jetstream.StreamConfig {
	return jetstream.StreamConfig{Name: SocketStream, Subjects: []string{"sk.d.*.*", "sk.r.*.*"}, Storage: jetstream.FileStorage,
		RePublish: &jetstream.RePublish{Source: "sk.d.*.*", Destination: "sk.told.{{wildcard(1)}}.{{wildcard(2)}}"}}
}

// SocketHub plays the controller of the socket floor, in a process of its
// own so that the operating system counts it apart: it says "ready" on
// out, then for each line of in ("own" or "shared") tells n agents of that
// kind a declaration each, as a push appends them, and says "done" once it
// has read every report of the round by one ordered consumer, as the fold
// reads them.
func SocketHub(ctx context.Context, url string, n int, in io.Reader, out io.Writer) error {
	nc, err := nats.Connect(url, nats.Name("mesh bench hub"))
	if err != nil {
		return fmt.Errorf("bench: the sockets' hub cannot connect to its bus: %w", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(2*n+window))
	if err != nil {
		return err
	}
	payload := make([]byte, Payload)
	rand.Read(payload)
	var mu sync.Mutex
	var kind string
	got, all := 0, make(chan struct{}, 1)
	cons, err := js.OrderedConsumer(ctx, SocketStream, jetstream.OrderedConsumerConfig{FilterSubjects: []string{"sk.r.*.*"}, DeliverPolicy: jetstream.DeliverNewPolicy})
	if err != nil {
		return fmt.Errorf("bench: the sockets' hub cannot read the reports: %w", err)
	}
	cc, err := cons.Consume(func(m jetstream.Msg) {
		if _, err := m.Metadata(); err != nil {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if strings.HasPrefix(m.Subject(), "sk.r."+kind+".") {
			if got++; got == n {
				all <- struct{}{}
			}
		}
	})
	if err != nil {
		return fmt.Errorf("bench: the sockets' hub cannot read the reports: %w", err)
	}
	defer cc.Stop()
	last := map[string]uint64{}
	fmt.Fprintln(out, "ready")
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		k := sc.Text()
		if k != "own" && k != "shared" {
			return fmt.Errorf("bench: the sockets' hub was given %q, not own or shared", k)
		}
		mu.Lock()
		kind, got = k, 0
		mu.Unlock()
		if err := tell(ctx, js, payload, k, n, last); err != nil {
			return err
		}
		select {
		case <-all:
		case <-ctx.Done():
			return ctx.Err()
		}
		fmt.Fprintln(out, "done")
	}
	return sc.Err()
}

// tell publishes a declaration to each of n agents as a push appends them:
// in flight together, each expecting its subject's last sequence.
func tell(ctx context.Context, js jetstream.JetStream, payload []byte, kind string, n int, last map[string]uint64) error {
	futures := make([]jetstream.PubAckFuture, n)
	for i := range n {
		subj := "sk.d." + kind + "." + strconv.Itoa(i)
		seq := strconv.FormatUint(last[subj], 10)
		f, err := js.PublishMsgAsync(appendMsg(subj, subj+"/"+seq, subj, seq, payload))
		if err != nil {
			return fmt.Errorf("bench: the sockets' hub cannot publish: %w", err)
		}
		futures[i] = f
	}
	for i, f := range futures {
		select {
		case ack := <-f.Ok():
			last["sk.d."+kind+"."+strconv.Itoa(i)] = ack.Sequence
		case err := <-f.Err():
			return fmt.Errorf("bench: the sockets' hub's publish was refused: %w", err)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// SocketAgents plays the agents of the socket floor, in a process of its
// own: n agents on connections of their own, and one more connection that
// answers for n more as the simulated fleet does. Each answers what it is
// told with a report; an agent of its own waits for the report's
// acknowledgement, at a random moment within the span the last line of in
// said ("spread 1.5s", answered "ok"). It says "ready" once every agent
// listens.
func SocketAgents(ctx context.Context, url string, n int, in io.Reader, out io.Writer) error {
	var c clients
	c.report = make([]byte, ReportPayload)
	rand.Read(c.report)
	conns := make([]*nats.Conn, n)
	defer func() {
		for _, nc := range conns {
			if nc != nil {
				nc.Close()
			}
		}
	}()
	// Connected 64 at a time, as mesh fleet opens its agents.
	errs := make([]error, n)
	var wg sync.WaitGroup
	room := make(chan struct{}, 64)
	for i := range n {
		room <- struct{}{}
		wg.Go(func() {
			defer func() { <-room }()
			conns[i], errs[i] = c.agent(url, i)
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	stop, err := c.shared(ctx, url, n)
	if err != nil {
		return err
	}
	defer stop()
	fmt.Fprintln(out, "ready")
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		_, over, _ := strings.Cut(sc.Text(), " ")
		spread, err := time.ParseDuration(over)
		if err != nil {
			return fmt.Errorf("bench: the sockets' agents were given %q, not a spread", sc.Text())
		}
		c.spread.Store(int64(spread))
		if err, ok := c.failed.Load().(error); ok {
			return fmt.Errorf("bench: a report was refused: %w", err)
		}
		fmt.Fprintln(out, "ok")
	}
	return sc.Err()
}

type clients struct {
	report []byte
	failed atomic.Value
	// spread is the span an agent of its own answers within (nanoseconds).
	spread atomic.Int64
}

// agent connects agent i, which answers each declaration it is told with
// a report it publishes and waits on, as an agent does.
func (c *clients) agent(url string, i int) (*nats.Conn, error) {
	nc, err := nats.Connect(url, nats.Name("mesh bench agent "+strconv.Itoa(i)))
	if err != nil {
		return nil, fmt.Errorf("bench: agent %d cannot connect to the sockets' bus: %w", i, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, err
	}
	work := make(chan *nats.Msg, 1)
	go func() {
		for range work {
			if d := c.spread.Load(); d > 0 {
				// Each agent answers in its own time, as machines do,
				// over the span the mesh's real agents took.
				time.Sleep(time.Duration(mrand.Int64N(d)))
			}
			m := c.reportMsg("own", strconv.Itoa(i), strconv.FormatInt(time.Now().UnixNano(), 36))
			if _, err := js.PublishMsg(context.Background(), m); err != nil {
				c.failed.Store(err)
			}
		}
	}()
	// Alive every events.LiveEvery from a random moment on, as an agent
	// beats: the bus they connect to is never idle, and a message that
	// arrives alone wakes a bus busy with beats, not one asleep.
	go func() {
		beat := make([]byte, 64)
		time.Sleep(time.Duration(mrand.Int64N(int64(events.LiveEvery))))
		t := time.NewTicker(events.LiveEvery)
		defer t.Stop()
		for range t.C {
			if nc.IsClosed() {
				return
			}
			nc.Publish("sk.live."+strconv.Itoa(i), beat)
		}
	}()
	_, err = nc.Subscribe("sk.told.own."+strconv.Itoa(i), func(m *nats.Msg) { work <- m })
	if err == nil {
		err = nc.Flush()
	}
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("bench: agent %d cannot listen: %w", i, err)
	}
	return nc, nil
}

// shared answers for n agents on one connection, the simulated fleet's
// way: one subscription hears what they are told, and every report is
// published asynchronously, its acknowledgement awaited in order.
func (c *clients) shared(ctx context.Context, url string, n int) (func(), error) {
	nc, err := nats.Connect(url, nats.Name("mesh bench shared agents"))
	if err != nil {
		return nil, fmt.Errorf("bench: the shared agents cannot connect: %w", err)
	}
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(2*n+window))
	if err != nil {
		nc.Close()
		return nil, err
	}
	acks := make(chan jetstream.PubAckFuture, 2*n+window)
	go func() {
		for f := range acks {
			select {
			case <-f.Ok():
			case err := <-f.Err():
				c.failed.Store(err)
			}
		}
	}()
	// Told by the stream's republish, as the simulated fleet hears it:
	// one subscription, its buffer unbounded (a slow consumer dropped
	// would be a report never made).
	sub, err := nc.Subscribe("sk.told.shared.*", func(m *nats.Msg) {
		i := m.Subject[len("sk.told.shared."):]
		f, err := js.PublishMsgAsync(c.reportMsg("shared", i, m.Header.Get(jetstream.SequenceHeader)))
		if err != nil {
			c.failed.Store(err)
			return
		}
		acks <- f
	})
	if err == nil {
		if err = sub.SetPendingLimits(-1, -1); err == nil {
			err = nc.Flush()
		}
	}
	if err != nil {
		nc.Close()
		close(acks) // nothing was told them yet: no callback sends on it
		return nil, fmt.Errorf("bench: the shared agents cannot hear what they are told: %w", err)
	}
	return func() { nc.Close() }, nil
}

// reportMsg is agent i's report with the headers an agent's carries: its
// id, its report key and signature, its MAC.
func (c *clients) reportMsg(kind, i, id string) *nats.Msg {
	m := nats.NewMsg("sk.r." + kind + "." + i)
	m.Data = c.report
	m.Header.Set(jetstream.MsgIDHeader, "rep."+kind+"."+i+"."+id)
	m.Header.Set(events.SignerHeader, "UBENCHREPORTKEYOFTHEAGENTXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX")
	m.Header.Set(events.SignatureHeader, base64.StdEncoding.EncodeToString(c.report[:64]))
	m.Header.Set(events.MACHeader, base64.StdEncoding.EncodeToString(c.report[64:96]))
	return m
}
