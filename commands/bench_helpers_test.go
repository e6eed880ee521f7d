package commands

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/meshctl/mesh/commands/core"
	"github.com/meshctl/mesh/declaration"
	"github.com/meshctl/mesh/embedded/embeddedtest"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/events/store"
	"github.com/meshctl/mesh/projections"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"
)

// benchMesh is a real bus, stream and read models for the benchmarks, filled
// by publishing events directly (fast) and folded before the clock starts.
type benchMesh struct {
	b    testing.TB
	st   *store.Store
	js   jetstream.JetStream
	proj *projections.Engine
	h    *Handlers
	kp   nkeys.KeyPair
	keys *declaration.Keyring
	// agent signs the reports the benchmark writes as every node's agent.
	agent *declaration.Signer
}

// newBenchMesh connects in-process, as mesh up's controller does, or over TCP.
func newBenchMesh(b testing.TB, inProcess bool) *benchMesh {
	b.Helper()
	srv := embeddedtest.Server(b)
	var nc *nats.Conn
	if inProcess {
		var err error
		if nc, err = srv.Connect(); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(nc.Close)
	} else {
		nc = embeddedtest.Conn(b, srv)
	}
	return benchMeshOn(b, nc, 1)
}

// newClusterBenchMesh is a 3-server cluster in this process, its stream
// replicated on all three, reached over TCP as mesh serve reaches one.
func newClusterBenchMesh(b testing.TB) *benchMesh {
	b.Helper()
	var urls []string
	for _, s := range embeddedtest.Cluster(b, 3) {
		urls = append(urls, s.ClientURL())
	}
	nc, err := nats.Connect(strings.Join(urls, ","))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(nc.Close)
	return benchMeshOn(b, nc, 3)
}

func benchMeshOn(b testing.TB, nc *nats.Conn, replicas int) *benchMesh {
	st, _, err := store.Open(context.Background(), nc, store.StreamConfig{Replicas: replicas})
	if err != nil {
		b.Fatal(err)
	}
	js, _ := jetstream.New(nc)
	kp, _ := nkeys.CreateAccount()
	keys, err := declaration.NewKeyring(kp)
	if err != nil {
		b.Fatal(err)
	}
	st.MAC = keys.LogMAC()
	agentKP, _ := nkeys.CreateUser()
	agent, _ := declaration.NewSigner(agentKP)
	return &benchMesh{b: b, st: st, js: js, kp: kp, keys: keys, agent: agent}
}

// report publishes ev as node's agent would: under the node's report
// subject, with its MAC and the agent's signature, without waiting for
// the acknowledgement. The node's report key must be recorded first
// (events.ReportKeyRecorded with m.agent's key).
func (m *benchMesh) report(node string, ev events.Event) {
	data, _ := events.Encode(events.NodeAggregate(node), "r", 0, time.Now(), ev)
	msg := nats.NewMsg(events.ReportSubject(node, ev.EventType()))
	msg.Data = data
	msg.Header.Set(events.MACHeader, declaration.MAC(m.keys.NodeMAC(node), msg.Subject, data))
	msg.Header.Set(events.SignerHeader, m.agent.PublicKey())
	msg.Header.Set(events.SignatureHeader, m.agent.Sign(data))
	if _, err := m.js.PublishMsgAsync(msg); err != nil {
		m.b.Fatal(err)
	}
}

// publish appends ev as the controller would (with its MAC), without
// waiting for each acknowledgement.
func (m *benchMesh) publish(agg events.AggregateID, ev events.Event) {
	data, _ := events.Encode(agg, "c", 0, time.Now(), ev)
	msg := nats.NewMsg(agg.Subject(ev.EventType()))
	msg.Data = data
	msg.Header.Set(events.MACHeader, declaration.MAC(m.keys.LogMAC(), msg.Subject, data))
	if _, err := m.js.PublishMsgAsync(msg); err != nil {
		m.b.Fatal(err)
	}
}

// fold waits for the publishes, folds them, and makes handlers with a key.
func (m *benchMesh) fold() *Handlers {
	ctx := context.Background()
	<-m.js.PublishAsyncComplete()
	proj, _, err := projections.Open(ctx, projections.Options{Dir: m.b.TempDir(), Store: m.st, Keys: m.keys})
	if err != nil {
		m.b.Fatal(err)
	}
	m.b.Cleanup(func() { proj.Close() })
	proj.Start()
	state, _ := m.st.State(ctx)
	if err := proj.WaitFor(ctx, state.LastSeq); err != nil {
		m.b.Fatal(err)
	}
	// The events published are the controller's: a foreign one would be
	// set aside cheaply and flatter whatever is measured over it.
	if err := proj.Read(func(v *projections.View) error {
		if n, first, err := v.OpenForeign(); err != nil || n > 0 {
			return fmt.Errorf("%d foreign message(s) among the benchmark's events, the first %+v: %v", n, first, err)
		}
		return nil
	}); err != nil {
		m.b.Fatal(err)
	}
	signer, _ := declaration.NewSigner(m.kp)
	m.proj = proj
	m.h = newHandlers(&core.Core{Self: core.Self{Store: m.st, Log: slog.New(slog.DiscardHandler), Mesh: "mesh",
		Key: m.kp, Signer: signer, PublicKey: signer.PublicKey(), Keys: m.keys}, Proj: proj, Now: time.Now})
	return m.h
}

// benchNodes is how many nodes a benchmark's mesh holds: def, or
// MESH_BENCH_NODES (issue 13 measures 100,000 the same way).
func benchNodes(def int) int {
	if v, err := strconv.Atoi(os.Getenv("MESH_BENCH_NODES")); err == nil && v > 0 {
		return v
	}
	return def
}
