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

// Sockets are the bus's CPU a message exchange (a declaration stored and
// delivered, a report stored and acknowledged), the least of the rounds.
type Sockets struct {
	// Own is per agent, each on a connection of its own, told by the
	// stream's republish and reporting with a publish it waits on, each
	// answering at a random moment within Span (the reports' span of the
	// run's real agents: each message then arrives alone, and the bus
	// wakes for each, where reports arriving together share its work).
	Own  time.Duration
	Span time.Duration
	// Burst is the same with every agent answering at once.
	Burst time.Duration
	// Shared is the same exchange over one connection: the declarations
	// read by one ordered consumer, the reports published asynchronously.
	Shared time.Duration
}

// Price is what a socket of its own costs the bus an agent and a push.
func (s Sockets) Price() time.Duration { return max(s.Own-s.Shared, 0) }

// The socket floor's stream: a declaration on sk.d.KIND.N, republished once
// stored to sk.told.KIND.N as the mesh's stream republishes to its
// node's agent, and its report on sk.r.KIND.N.
const (
	SocketStream = "SOCKETS"
	reportSize   = 420 // a DeclarationApplied as agents append it: 400-440 bytes
)

// SocketStreamConfig is that stream, as the mesh's own is kept: on disk,
// republishing every declaration once stored.
func SocketStreamConfig() jetstream.StreamConfig {
	return jetstream.StreamConfig{Name: SocketStream, Subjects: []string{"sk.d.*.*", "sk.r.*.*"}, Storage: jetstream.FileStorage,
		RePublish: &jetstream.RePublish{Source: "sk.d.*.*", Destination: "sk.told.{{wildcard(1)}}.{{wildcard(2)}}"}}
}

// SocketClients is the far side of the socket floor, a process of its own
// so that the bus's CPU is counted apart: n agents on connections of their
// own and one more connection that plays the controller and the simulated
// fleet. It says "ready" on out once every agent listens, then runs one
// round for each line of in ("own SPAN" or "shared SPAN": in an own round
// each agent answers at a random moment within SPAN) and says "done"
// when every report of it is acknowledged.
func SocketClients(ctx context.Context, url string, n int, in io.Reader, out io.Writer) error {
	hub, err := nats.Connect(url, nats.Name("mesh bench sockets"))
	if err != nil {
		return fmt.Errorf("bench: cannot connect to the sockets' bus: %w", err)
	}
	defer hub.Close()
	// Room for every declaration and report of a round in flight: a
	// push's appends are windowed by the controller, the simulated
	// fleet's reports by its own window, and neither stalls here.
	js, err := jetstream.New(hub, jetstream.WithPublishAsyncMaxPending(2*n+window))
	if err != nil {
		return err
	}
	var c clients
	c.acked = make(chan struct{}, n)
	c.payload, c.report = make([]byte, Payload), make([]byte, reportSize)
	rand.Read(c.payload)
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
	// The controller's fold reads every report as it is stored, whoever
	// sent it: so does the hub, by one ordered consumer as the fold's.
	folded, err := js.OrderedConsumer(ctx, SocketStream, jetstream.OrderedConsumerConfig{FilterSubjects: []string{"sk.r.*.*"}, DeliverPolicy: jetstream.DeliverNewPolicy})
	if err != nil {
		return fmt.Errorf("bench: the sockets' hub cannot read the reports: %w", err)
	}
	fold, err := folded.Consume(func(m jetstream.Msg) { m.Metadata() })
	if err != nil {
		return fmt.Errorf("bench: the sockets' hub cannot read the reports: %w", err)
	}
	defer fold.Stop()
	fmt.Fprintln(out, "ready")
	sc := bufio.NewScanner(in)
	for round := 0; sc.Scan(); round++ {
		kind, over, _ := strings.Cut(sc.Text(), " ")
		spread, err := time.ParseDuration(over)
		if (kind != "own" && kind != "shared") || err != nil {
			return fmt.Errorf("bench: the sockets' round %q is not own or shared and a span", sc.Text())
		}
		c.spread.Store(int64(spread))
		if err := c.round(ctx, js, kind, round, n); err != nil {
			return err
		}
		fmt.Fprintln(out, "done")
	}
	return sc.Err()
}

type clients struct {
	payload, report []byte
	acked           chan struct{}
	failed          atomic.Value
	// spread is the span an own round's agents answer over (nanoseconds).
	spread atomic.Int64
	// last is each declaration subject's last stream sequence: the next
	// publish expects it, as an append expects its aggregate's version.
	last sync.Map
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
			m := c.reportMsg("own", i, strconv.FormatInt(time.Now().UnixNano(), 36))
			if _, err := js.PublishMsg(context.Background(), m); err != nil {
				c.failed.Store(err)
			}
			c.acked <- struct{}{}
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

// reportMsg is a report with the headers an agent's carries: its id, its
// report key and signature, its MAC.
func (c *clients) reportMsg(kind string, i int, id string) *nats.Msg {
	m := nats.NewMsg("sk.r." + kind + "." + strconv.Itoa(i))
	m.Data = c.report
	m.Header.Set(jetstream.MsgIDHeader, "rep."+kind+"."+strconv.Itoa(i)+"."+id)
	m.Header.Set(events.SignerHeader, "UBENCHREPORTKEYOFTHEAGENTXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX")
	m.Header.Set(events.SignatureHeader, base64.StdEncoding.EncodeToString(c.report[:64]))
	m.Header.Set(events.MACHeader, base64.StdEncoding.EncodeToString(c.report[64:96]))
	return m
}

// round tells every agent a declaration and waits for every report.
func (c *clients) round(ctx context.Context, js jetstream.JetStream, kind string, round, n int) error {
	var reports []jetstream.PubAckFuture
	if kind == "shared" {
		// The simulated fleet's way: one ordered consumer reads what was
		// told, one connection publishes every report and awaits its ack.
		info, err := js.Stream(ctx, SocketStream)
		if err != nil {
			return err
		}
		from := info.CachedInfo().State.LastSeq + 1
		cons, err := js.OrderedConsumer(ctx, SocketStream, jetstream.OrderedConsumerConfig{FilterSubjects: []string{"sk.d.shared.*"},
			DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: from})
		if err != nil {
			return err
		}
		var mu sync.Mutex
		got := 0
		read := make(chan struct{})
		cc, err := cons.Consume(func(m jetstream.Msg) {
			mu.Lock()
			defer mu.Unlock()
			if got++; got > n {
				return
			}
			i := len(reports)
			f, err := js.PublishMsgAsync(c.reportMsg("shared", i, strconv.Itoa(round)))
			if err != nil {
				c.failed.Store(err)
			}
			reports = append(reports, f)
			if got == n {
				close(read)
			}
		}, jetstream.PullMaxMessages(5000))
		if err != nil {
			return err
		}
		defer cc.Stop()
		if err := c.tell(ctx, js, kind, n); err != nil {
			return err
		}
		select {
		case <-read:
		case <-ctx.Done():
			return ctx.Err()
		}
		for _, f := range reports {
			select {
			case <-f.Ok():
			case err := <-f.Err():
				return fmt.Errorf("bench: a shared report was refused: %w", err)
			}
		}
	} else {
		if err := c.tell(ctx, js, kind, n); err != nil {
			return err
		}
		for range n {
			select {
			case <-c.acked:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	if err, ok := c.failed.Load().(error); ok {
		return fmt.Errorf("bench: a report was refused: %w", err)
	}
	return nil
}

// tell publishes a declaration to each of n agents as a push appends them:
// in flight together, each expecting its subject's last sequence.
func (c *clients) tell(ctx context.Context, js jetstream.JetStream, kind string, n int) error {
	mac := "bWVzaCBiZW5jaDogYSBNQUMncyBsZW5ndGggaW4gYmFzZTY0"
	futures := make([]jetstream.PubAckFuture, n)
	for i := range n {
		subj := "sk.d." + kind + "." + strconv.Itoa(i)
		last, _ := c.last.Load(subj)
		seq, _ := last.(uint64)
		m := nats.NewMsg(subj)
		m.Data = c.payload
		m.Header.Set(jetstream.MsgIDHeader, subj+"/"+strconv.FormatUint(seq, 10))
		m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(seq, 10))
		m.Header.Set(jetstream.ExpectedLastSubjSeqSubjHeader, subj)
		m.Header.Set(events.MACHeader, mac)
		f, err := js.PublishMsgAsync(m)
		if err != nil {
			return fmt.Errorf("bench: the sockets' floor cannot publish: %w", err)
		}
		futures[i] = f
	}
	for i, f := range futures {
		select {
		case ack := <-f.Ok():
			c.last.Store("sk.d."+kind+"."+strconv.Itoa(i), ack.Sequence)
		case err := <-f.Err():
			return fmt.Errorf("bench: the sockets' floor's publish was refused: %w", err)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}
