package projections

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/meshctl/mesh/compose"
	"github.com/meshctl/mesh/declaration"
	"github.com/meshctl/mesh/embedded/embeddedtest"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/events/store"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"
)

// benchEvents is the stream length each iteration folds.
const benchEvents = 100_000

// BenchmarkFoldVsRawRead folds a stream of node events into Pebble on disk,
// beside a raw ordered-consumer read of the same stream in the same run. The
// figure that matters is fold/raw, the share of the raw read rate a fold keeps
// (target 0.5 or better).
func BenchmarkFoldVsRawRead(b *testing.B) {
	ctx := context.Background()
	srv := embeddedtest.Server(b)
	nc := embeddedtest.Conn(b, srv)
	s, _, err := store.Open(ctx, nc, store.StreamConfig{})
	if err != nil {
		b.Fatal(err)
	}
	keyed(s)
	js, _ := jetstream.New(nc)
	publishEnrolments(b, js, benchEvents)
	dir := b.TempDir()
	var raw, fold time.Duration
	b.ResetTimer()
	for i := range b.N {
		t0 := time.Now()
		rawRead(b, js)
		t1 := time.Now()
		e, _, err := Open(ctx, Options{Dir: filepath.Join(dir, fmt.Sprint(i)), Store: s, Keys: testKeys})
		if err != nil {
			b.Fatal(err)
		}
		e.Start()
		if err := e.WaitFor(ctx, benchEvents); err != nil {
			b.Fatal(err)
		}
		fold += time.Since(t1)
		raw += t1.Sub(t0)
		e.Close()
	}
	b.StopTimer()
	total := float64(b.N * benchEvents)
	b.ReportMetric(total/raw.Seconds(), "raw-read/s")
	b.ReportMetric(total/fold.Seconds(), "fold/s")
	b.ReportMetric(raw.Seconds()/fold.Seconds(), "fold/raw")
}

// rawRead is the floor: an ordered consumer with the same pull size, doing nothing.
func rawRead(b *testing.B, js jetstream.JetStream) {
	cons, err := js.OrderedConsumer(context.Background(), events.Stream, jetstream.OrderedConsumerConfig{})
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan struct{})
	cc, err := cons.Consume(func(m jetstream.Msg) {
		if md, _ := m.Metadata(); md.NumPending == 0 {
			close(done)
		}
	}, jetstream.PullMaxMessages(5000))
	if err != nil {
		b.Fatal(err)
	}
	<-done
	cc.Stop()
}

// BenchmarkRebuild rebuilds the read models of a stream of about
// MESH_BENCH_EVENTS events of real traffic (default 1,000,000; see
// publishTraffic: a third of them signed reports, a third 1.4 KB
// declarations) while the live ones keep serving, beside a raw
// ordered-consumer read of the same stream in the same run. Target: the
// rebuild at 0.4 of the raw read rate or better, every message's proof
// checked (rule 19).
func BenchmarkRebuild(b *testing.B) {
	ctx := context.Background()
	s, js := trafficStore(b, benchSize(1_000_000))
	st, _ := s.State(ctx)
	n := int(st.LastSeq)
	e, _, err := Open(ctx, Options{Dir: b.TempDir(), Store: s, Keys: testKeys})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	e.Start()
	if err := e.WaitFor(ctx, uint64(n)); err != nil {
		b.Fatal(err)
	}
	// Every message rightful: a foreign one is set aside cheaply, and a
	// stream of them would flatter the fold.
	if err := e.Read(func(v *View) error {
		if open, first, err := v.OpenForeign(); err != nil || open > 0 {
			return fmt.Errorf("%d foreign message(s) in the benchmark's traffic, the first %+v: %v", open, first, err)
		}
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	var raw, rebuild time.Duration
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		rawRead(b, js)
		t1 := time.Now()
		var rerr error
		// Labelled, so that a profile can be narrowed to the rebuild and
		// the goroutines it starts (go tool pprof -tagfocus fold=rebuild).
		pprof.Do(ctx, pprof.Labels("fold", "rebuild"), func(ctx context.Context) { _, rerr = e.Rebuild(ctx, nil) })
		if rerr != nil {
			b.Fatal(rerr)
		}
		rebuild += time.Since(t1)
		raw += t1.Sub(t0)
	}
	b.StopTimer()
	// Verify folds the same stream again and compares it row by row with
	// the live read models: at most twice a rebuild's time (issue 13).
	t0 := time.Now()
	if diff, _, err := e.Verify(ctx, nil); err != nil || diff != "" {
		b.Fatalf("verify: %v\n%s", err, diff)
	}
	verify := time.Since(t0)
	total := float64(b.N * n)
	b.ReportMetric(total/raw.Seconds(), "raw-read/s")
	b.ReportMetric(total/rebuild.Seconds(), "rebuild/s")
	b.ReportMetric(raw.Seconds()/rebuild.Seconds(), "rebuild/raw")
	b.ReportMetric(verify.Seconds()/(rebuild.Seconds()/float64(b.N)), "verify/rebuild")
}

func benchSize(def int) int {
	if v, err := strconv.Atoi(os.Getenv("MESH_BENCH_EVENTS")); err == nil && v > 0 {
		return v
	}
	return def
}

func publishEnrolments(b *testing.B, js jetstream.JetStream, n int) {
	for i := range n {
		name := fmt.Sprintf("node-%d", i)
		publishAs(b, js, testKeys.LogMAC(), nil, events.NodeAggregate(name), events.NodeEnrolled{Name: name, Capabilities: []string{"linux"}, Labels: map[string]string{"zone": "a"}})
	}
	<-js.PublishAsyncComplete()
}

// publishAs publishes ev as its writer would: with the MAC under mac and,
// when signer is set, signed by it; without waiting for each acknowledgement.
// A publish waits up to a minute for room among those in flight: the
// library's 200 ms failed "stalled with too many outstanding async
// published messages" at 400,000 events on a box at load 12.
func publishAs(b *testing.B, js jetstream.JetStream, mac []byte, signer *declaration.Signer, agg events.AggregateID, ev events.Event) {
	if _, err := js.PublishMsgAsync(msgAs(b, mac, signer, agg, ev), jetstream.WithStallWait(time.Minute)); err != nil {
		b.Fatal(err)
	}
}

// msgAs is ev as its writer would publish it: with the MAC under mac and,
// when signer is set, signed by it.
func msgAs(b *testing.B, mac []byte, signer *declaration.Signer, agg events.AggregateID, ev events.Event) *nats.Msg {
	data, err := events.Encode(agg, "c", "", 0, time.Now(), ev)
	if err != nil {
		b.Fatal(err)
	}
	subject := agg.Subject(ev.EventType())
	if events.Rights[ev.EventType()].Writer == events.ByNode {
		subject = events.ReportSubject(agg.ID, ev.EventType())
	}
	m := nats.NewMsg(subject)
	m.Data = data
	m.Header.Set(events.MACHeader, declaration.MAC(mac, subject, data))
	if signer != nil {
		m.Header.Set(events.SignerHeader, signer.PublicKey())
		m.Header.Set(events.SignatureHeader, signer.Sign(data))
	}
	return m
}

// publishTraffic publishes about n events as a busy mesh writes them: for
// each of a thousand nodes its enrolment and its report key, then rounds of
// a declaration sent (about 1.4 KB, as a real one of a few files), the
// agent's signed report on it, and an assignment: a third of the stream
// signed reports, every message proved as the fold checks it.
func publishTraffic(b *testing.B, js jetstream.JetStream, n int) {
	const nodes = 1000
	kp, _ := nkeys.CreateUser()
	agentKey, _ := declaration.NewSigner(kp)
	log := testKeys.LogMAC()
	content := strings.Repeat("some configuration line of a module's file\n", 20)
	rounds := max(1, (n-2*nodes)/(3*nodes))
	for i := range nodes {
		name := fmt.Sprintf("node-%d", i)
		publishAs(b, js, log, nil, events.NodeAggregate(name), events.NodeEnrolled{Name: name, Capabilities: []string{"linux"}})
		publishAs(b, js, testKeys.NodeMAC(name), agentKey, events.NodeAggregate(name), events.ReportKeyRecorded{Node: name, Key: agentKey.PublicKey()})
	}
	for r := range rounds {
		for i := range nodes {
			name := fmt.Sprintf("node-%d", i)
			d := declaration.New(compose.Declaration{Mesh: "mesh", Node: name,
				Modules:   []compose.ModuleBuild{{Module: "app", Build: strings.Repeat("b", 64)}},
				Resources: []compose.Resource{{Path: "/etc/app/app.conf", Kind: "file", Mode: "0644", Content: &content, Module: "app"}},
				Receives:  []compose.Receipt{}}, uint64(r+1), "", time.Now())
			bytes := d.Canonical()
			digest := compose.Digest(bytes)
			publishAs(b, js, log, nil, events.NodeAggregate(name), events.DeclarationSent{Node: name, Sequence: uint64(r + 1), Digest: digest,
				ContentDigest: d.ContentDigest(), By: "push", Resources: 1, Declaration: bytes, Signature: make([]byte, 64), Key: testKeys.Controller()})
			publishAs(b, js, testKeys.NodeMAC(name), agentKey, events.NodeAggregate(name), events.DeclarationApplied{Node: name, Sequence: uint64(r + 1), Digest: digest, Changed: 1})
			publishAs(b, js, log, nil, events.NodeAggregate(name), events.ModuleAssigned{Node: name, Module: "app", Build: strings.Repeat("b", 64),
				Settings: map[string]string{"round": strconv.Itoa(r)}})
		}
	}
	<-js.PublishAsyncComplete()
}

// BenchmarkStartFromPublished starts read models for a stream of about
// MESH_BENCH_EVENTS events of real traffic (default 200,000; see
// publishTraffic) two ways in the same run: from the newest snapshot on
// the bus (fetched, its digest checked, then the tail folded), and from
// nothing (a fold of every event). Issue 34: a controller with no read
// models ready in at most 5 s whatever the stream's length, since it
// folds only what came after the newest snapshot (at most
// --publish-snapshot-every events).
func BenchmarkStartFromPublished(b *testing.B) {
	ctx := context.Background()
	s, _ := trafficStore(b, benchSize(200_000))
	st, _ := s.State(ctx)
	last := st.LastSeq
	// One local snapshot, at the end, published: the tail a start folds is
	// then what arrives after it, none here, so the figure is the fetch.
	e, _, err := Open(ctx, Options{Dir: b.TempDir(), Store: s, Keys: testKeys, SnapshotEvery: last})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	e.Start()
	if err := e.WaitFor(ctx, last); err != nil {
		b.Fatal(err)
	}
	sn, err := e.Publish(ctx)
	if err != nil {
		b.Fatal(err)
	}
	start := func(from bool) time.Duration {
		t0 := time.Now()
		c, o, err := Open(ctx, Options{Dir: b.TempDir(), Store: s, Keys: testKeys, FromPublished: from})
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		if from && o.FromSnapshot != sn.Checkpoint {
			b.Fatalf("started from event %d, not the snapshot's %d", o.FromSnapshot, sn.Checkpoint)
		}
		c.Start()
		if err := c.WaitFor(ctx, last); err != nil {
			b.Fatal(err)
		}
		return time.Since(t0)
	}
	var fromSnap, full time.Duration
	b.ResetTimer()
	for range b.N {
		fromSnap += start(true)
		full += start(false)
	}
	b.StopTimer()
	b.ReportMetric(fromSnap.Seconds()/float64(b.N), "s/start-from-snapshot")
	b.ReportMetric(full.Seconds()/float64(b.N), "s/start-from-nothing")
	b.ReportMetric(full.Seconds()/fromSnap.Seconds(), "nothing/snapshot")
	b.ReportMetric(float64(sn.Size)/(1<<20), "snapshot-MiB")
	b.ReportMetric(float64(last), "events")
}

// trafficStore is a store on a bus of its own holding about n events of
// real traffic (publishTraffic), appending as the test controller does.
func trafficStore(b *testing.B, n int) (*store.Store, jetstream.JetStream) {
	nc := embeddedtest.Conn(b, embeddedtest.Server(b))
	s, _, err := store.Open(context.Background(), nc, store.StreamConfig{})
	if err != nil {
		b.Fatal(err)
	}
	keyed(s)
	js, _ := jetstream.New(nc)
	publishTraffic(b, js, n)
	return s, js
}
