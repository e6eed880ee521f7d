package bench

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/meshctl/mesh/embedded"
	"github.com/meshctl/mesh/events"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Costs are the floor of this machine: the CPU time one operation takes,
// the bus's and the client's together (both run in this process, over
// loopback TCP as the mesh's processes talk).
type Costs struct {
	// Sign is one ed25519 signature of a declaration's bytes.
	Sign time.Duration
	// Publish is one JetStream publish with the headers every append
	// carries (a Msg-Id, an expectation on its aggregate's filter, the
	// controller's MAC), in flight together as a push's are, acknowledged.
	Publish time.Duration
	// Read is one message of an ordered consumer, its metadata read, as
	// the fold's consumer reads the log.
	Read time.Duration
	// Verify is one ed25519 verification of a report's bytes: what the
	// fold does for each report of a node that made its own keys (issue
	// 29), which a simulated node's MAC, derived from the controller key,
	// does not cost. Only the real agents' row is held against it.
	Verify time.Duration
	// Faults are the pages a round of all four faulted in (Usage.Faults):
	// the floor is no more free of first touches than a push is, and
	// mesh bench prints both.
	Faults int64
}

// String is each operation's cost as a progress line says it.
func (c Costs) String() string {
	return fmt.Sprintf("sign %s, publish %s, read %s, verify %s", us(c.Sign), us(c.Publish), us(c.Read), us(c.Verify))
}

// Payload is the size of the messages the floor signs, publishes and
// reads: about that of a DeclarationSent of mesh bench's module to one
// node, so the floor's two publishes move at least the bytes a node's
// send and report do (a send alone is larger than one). Read back
// from a bench's stream: a send's body 1,345 bytes (its declaration 365,
// and the window's proof, in base64), its report's 338; the headers 241
// and 286, the floor's about 200.
const Payload = 1200

// ReportPayload is the size of the report the floor verifies and the
// sockets' agents publish: a DeclarationApplied as agents append it was
// 400-440 bytes; the body its signature covers, read back from a bench's
// stream, 338, which SHA-512 hashes in as many blocks as 420.
const ReportPayload = 420

// window is how many publishes the floor keeps in flight, as
// events/store's AppendMany does.
const window = 2000

// Floor measures the floor with ops operations of each kind, rounds
// times, on a bus of its own in dir, and keeps each operation's median
// round: each row's figure is its median push, and a ratio holds the same
// statistic on both sides. The least round, which this kept before, held
// the median push against the floor's luckiest round of three (its
// ordered read ran 6.6 to 14.1 µs on a shared box), so a ratio moved with
// the floor's luck rather than the mesh (docs/performance.md, "One run:
// mesh bench").
func Floor(ctx context.Context, dir string, ops, rounds int) (Costs, error) {
	if ops < 1 || rounds < 1 {
		return Costs{}, errors.New("bench: the floor needs at least one operation and one round")
	}
	srv, err := embedded.Start(ctx, embedded.Options{Dir: dir, Port: -1})
	if err != nil {
		return Costs{}, err
	}
	defer srv.Close()
	nc, err := nats.Connect(srv.ClientURL(), nats.Name("mesh bench floor"))
	if err != nil {
		return Costs{}, fmt.Errorf("bench: cannot connect to the floor's bus: %w", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(2*window))
	if err != nil {
		return Costs{}, err
	}
	stream, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "FLOOR", Subjects: []string{"floor.>"}, Storage: jetstream.FileStorage})
	if err != nil {
		return Costs{}, fmt.Errorf("bench: cannot create the floor's stream: %w", err)
	}
	payload := make([]byte, Payload)
	rand.Read(payload)
	var measured []Costs
	for r := range rounds {
		sc, sf, err := perOp(ops, func() error { return signAll(payload, ops) })
		if err != nil {
			return Costs{}, err
		}
		vc, vf, err := perOp(ops, func() error { return verifyAll(payload[:ReportPayload], ops) })
		if err != nil {
			return Costs{}, err
		}
		info, err := stream.Info(ctx)
		if err != nil {
			return Costs{}, err
		}
		from := info.State.LastSeq + 1
		pc, pf, err := perOp(ops, func() error { return publishAll(ctx, js, payload, r, ops) })
		if err != nil {
			return Costs{}, err
		}
		rc, rf, err := perOp(ops, func() error { return readAll(ctx, js, from, ops) })
		if err != nil {
			return Costs{}, err
		}
		measured = append(measured, Costs{Sign: sc, Publish: pc, Read: rc, Verify: vc, Faults: sf + vf + pf + rf})
	}
	return MedianCosts(measured), nil
}

// MedianCosts keeps each operation's median of rounds: a floor's own, or
// those measured apart (mesh bench measures a floor before each push).
func MedianCosts(rounds []Costs) Costs {
	if len(rounds) == 0 {
		return Costs{}
	}
	var sign, publish, read, verify []time.Duration
	var faults []int64
	for _, c := range rounds {
		sign, publish, read, verify = append(sign, c.Sign), append(publish, c.Publish), append(read, c.Read), append(verify, c.Verify)
		faults = append(faults, c.Faults)
	}
	return Costs{Sign: Median(sign), Publish: Median(publish), Read: Median(read), Verify: Median(verify), Faults: Median(faults)}
}

// perOp is the CPU time this process spends in do, divided by ops, and
// the pages it faulted in meanwhile.
func perOp(ops int, do func() error) (time.Duration, int64, error) {
	before, err := Self()
	if err != nil {
		return 0, 0, err
	}
	if err := do(); err != nil {
		return 0, 0, err
	}
	after, err := Self()
	if err != nil {
		return 0, 0, err
	}
	return (after.CPU - before.CPU) / time.Duration(ops), after.Faults - before.Faults, nil
}

func signAll(payload []byte, ops int) error {
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return err
	}
	for range ops {
		ed25519.Sign(key, payload)
	}
	return nil
}

// verifyAll verifies one signature of report ops times, as the fold checks
// each report of a node that made its own keys.
func verifyAll(report []byte, ops int) error {
	pub, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return err
	}
	sig := ed25519.Sign(key, report)
	for range ops {
		if !ed25519.Verify(pub, report, sig) {
			return errors.New("bench: the floor's own signature did not verify")
		}
	}
	return nil
}

// publishAll appends ops messages, each the first on its own aggregate's
// subject as a node's declaration is on its own, with the headers of an
// append (events/store's message and expect).
func publishAll(ctx context.Context, js jetstream.JetStream, payload []byte, round, ops int) error {
	for start := 0; start < ops; start += window {
		end := min(start+window, ops)
		futures := make([]jetstream.PubAckFuture, 0, end-start)
		for i := start; i < end; i++ {
			agg := "floor.node.r" + strconv.Itoa(round) + "n" + strconv.Itoa(i)
			f, err := js.PublishMsgAsync(appendMsg(agg+".DeclarationSent", agg+"/0", agg+".>", "0", payload))
			if err != nil {
				return fmt.Errorf("bench: the floor cannot publish: %w", err)
			}
			futures = append(futures, f)
		}
		if err := Acked(ctx, futures); err != nil {
			return fmt.Errorf("bench: the floor's publish was refused: %w", err)
		}
	}
	return nil
}

// Acked waits for the acknowledgement of every publish in futures, and
// answers the first refusal, or ctx's error once it ends.
func Acked(ctx context.Context, futures []jetstream.PubAckFuture) error {
	for _, f := range futures {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// appendMsg is payload on subject with the headers of the mesh's append
// (events/store's message and expect): its id, the last sequence expected
// of filter, and a MAC's length of text the bus stores and never checks.
// The floor and the sockets' hub publish what the mesh's controller does.
func appendMsg(subject, id, filter, expected string, payload []byte) *nats.Msg {
	m := nats.NewMsg(subject)
	m.Data = payload
	m.Header.Set(jetstream.MsgIDHeader, id)
	m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, expected)
	m.Header.Set(jetstream.ExpectedLastSubjSeqSubjHeader, filter)
	m.Header.Set(events.MACHeader, "bWVzaCBiZW5jaDogYSBNQUMncyBsZW5ndGggaW4gYmFzZTY0")
	return m
}

// readAll reads ops messages from the stream's sequence from, by one
// ordered consumer with the pull size the mesh's raw-read benchmarks use.
func readAll(ctx context.Context, js jetstream.JetStream, from uint64, ops int) error {
	cons, err := js.OrderedConsumer(ctx, "FLOOR", jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: from})
	if err != nil {
		return fmt.Errorf("bench: the floor cannot read its stream: %w", err)
	}
	done := make(chan struct{})
	n := 0
	cc, err := cons.Consume(func(m jetstream.Msg) {
		if _, err := m.Metadata(); err != nil {
			return
		}
		if n++; n == ops {
			close(done)
		}
	}, jetstream.PullMaxMessages(5000))
	if err != nil {
		return fmt.Errorf("bench: the floor cannot read its stream: %w", err)
	}
	defer cc.Stop()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
