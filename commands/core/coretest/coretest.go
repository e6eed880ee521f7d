// Package coretest is a real bus, stream and read models for the tests and
// benchmarks of the controller's services, filled by publishing events
// directly (fast) and folded before a benchmark's clock starts: each
// service is made over the Core that Fold answers.
package coretest

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
	"github.com/meshctl/mesh/compose"
	"github.com/meshctl/mesh/declaration"
	"github.com/meshctl/mesh/embedded/embeddedtest"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/events/store"
	"github.com/meshctl/mesh/projections"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"
)

// Mesh is a real bus, stream and read models, filled by publishing events
// directly and folded on demand.
type Mesh struct {
	TB    testing.TB
	Store *store.Store
	JS    jetstream.JetStream
	Proj  *projections.Engine
	Key   nkeys.KeyPair
	Keys  *declaration.Keyring
	// Agent signs the reports the benchmark writes as every node's agent.
	Agent *declaration.Signer
}

// New connects in-process, as mesh up's controller does, or over TCP.
func New(b testing.TB, inProcess bool) *Mesh {
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
	return on(b, nc, 1)
}

// NewCluster is a 3-server cluster in this process, its stream
// replicated on all three, reached over TCP as mesh serve reaches one.
func NewCluster(b testing.TB) *Mesh {
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
	return on(b, nc, 3)
}

func on(b testing.TB, nc *nats.Conn, replicas int) *Mesh {
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
	st.RememberSends = true // as the controller's store (commands.openLog)
	agentKP, _ := nkeys.CreateUser()
	agent, _ := declaration.NewSigner(agentKP)
	return &Mesh{TB: b, Store: st, JS: js, Key: kp, Keys: keys, Agent: agent}
}

// Report publishes ev as node's agent would: under the node's report
// subject, with its MAC and the agent's signature, without waiting for
// the acknowledgement. The node's report key must be recorded first
// (events.ReportKeyRecorded with m.Agent's key).
func (m *Mesh) Report(node string, ev events.Event) {
	data, _ := events.Encode(events.NodeAggregate(node), "r", "", 0, time.Now(), ev)
	msg := nats.NewMsg(events.ReportSubject(node, ev.EventType()))
	msg.Data = data
	msg.Header.Set(events.MACHeader, declaration.MAC(m.Keys.NodeMAC(node), msg.Subject, data))
	msg.Header.Set(events.SignerHeader, m.Agent.PublicKey())
	msg.Header.Set(events.SignatureHeader, m.Agent.Sign(data))
	if _, err := m.JS.PublishMsgAsync(msg, jetstream.WithStallWait(stallWait)); err != nil {
		m.TB.Fatal(err)
	}
}

// stallWait is how long a publish waits for room among those not yet
// acknowledged: at nats.go's default of 200 ms a benchmark's setup of
// 20,000 events failed on a loaded box, before anything was measured.
const stallWait = time.Minute

// Publish appends ev as the controller would (with its MAC), without
// waiting for each acknowledgement.
func (m *Mesh) Publish(agg events.AggregateID, ev events.Event) {
	data, _ := events.Encode(agg, "c", "", 0, time.Now(), ev)
	msg := nats.NewMsg(agg.Subject(ev.EventType()))
	msg.Data = data
	msg.Header.Set(events.MACHeader, declaration.MAC(m.Keys.LogMAC(), msg.Subject, data))
	if _, err := m.JS.PublishMsgAsync(msg, jetstream.WithStallWait(stallWait)); err != nil {
		m.TB.Fatal(err)
	}
}

// Fold waits for the publishes, folds them, and answers a Core over the
// read models, with a key.
func (m *Mesh) Fold() *core.Core {
	ctx := context.Background()
	<-m.JS.PublishAsyncComplete()
	proj, _, err := projections.Open(ctx, projections.Options{Dir: m.TB.TempDir(), Store: m.Store, Keys: m.Keys})
	if err != nil {
		m.TB.Fatal(err)
	}
	m.TB.Cleanup(func() { proj.Close() })
	proj.Start()
	m.Proj = proj
	m.CaughtUp()
	signer, _ := declaration.NewSigner(m.Key)
	return &core.Core{Self: core.Self{Store: m.Store, Log: slog.New(slog.DiscardHandler), Mesh: "mesh",
		Key: m.Key, Signer: signer, PublicKey: signer.PublicKey(), Keys: m.Keys}, Proj: proj, Now: time.Now}
}

// CaughtUp waits for what m published to be stored and folded by the read
// models Fold opened, and fails if any of it was set aside as foreign: the
// events published are the controller's, and a foreign one would be set
// aside cheaply and flatter whatever is measured or checked over it.
func (m *Mesh) CaughtUp() {
	m.TB.Helper()
	ctx := context.Background()
	<-m.JS.PublishAsyncComplete()
	state, err := m.Store.State(ctx)
	if err != nil {
		m.TB.Fatal(err)
	}
	if err := m.Proj.WaitFor(ctx, state.LastSeq); err != nil {
		m.TB.Fatal(err)
	}
	if err := m.Proj.Read(func(v *projections.View) error {
		if n, first, err := v.OpenForeign(); err != nil || n > 0 {
			return fmt.Errorf("%d foreign message(s) among the events published, the first %+v: %v", n, first, err)
		}
		return nil
	}); err != nil {
		m.TB.Fatal(err)
	}
}

// Nodes is how many nodes a benchmark's mesh holds: def, or
// MESH_BENCH_NODES (issue 13 measures 100,000 the same way).
func Nodes(def int) int { return fromEnv("MESH_BENCH_NODES", def) }

// Events is how many events a benchmark's stream holds: def, or
// MESH_BENCH_EVENTS.
func Events(def int) int { return fromEnv("MESH_BENCH_EVENTS", def) }

// fromEnv is the positive count the variable name gives, or def.
func fromEnv(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// Send publishes, as the controller signing with signer would, the
// declaration number seq of node, chained to previous, of one file holding
// content; it answers the declaration's digest, the next one's previous.
func (m *Mesh) Send(signer *declaration.Signer, node string, seq uint64, previous, content string) string {
	d := declaration.New(compose.Declaration{Mesh: "mesh", Node: node, Modules: []compose.ModuleBuild{},
		Resources: []compose.Resource{{Path: "/etc/app.conf", Kind: "file", Mode: "0644", Content: &content, Module: "app"}},
		Receives:  []compose.Receipt{}}, seq, previous, time.Now())
	s := signer.Seal(d)
	m.Publish(events.NodeAggregate(node), events.DeclarationSent{Node: node, Sequence: seq, Digest: s.Digest(),
		ContentDigest: d.ContentDigest(), By: "push", Resources: 1, Declaration: s.Bytes, Signature: s.Signature, Key: s.Key})
	return s.Digest()
}
