package fleet

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"runtime/pprof"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/meshctl/mesh/agent"
	"github.com/meshctl/mesh/busauth"
	"github.com/meshctl/mesh/commands"
	"github.com/meshctl/mesh/embedded"
	"github.com/meshctl/mesh/embedded/embeddedtest"
	"github.com/meshctl/mesh/wire"
	"github.com/nats-io/nats.go"
)

// restartAgents and restartRounds size TestAFleetAppliesThroughBusRestarts:
// enough agents that a kill lands while some are mid-read, and the twenty
// restarts issue 28 asks for, within the suite's time on two cores. 60,
// not the 200 it was: the kill is drawn by how many agents applied (none
// to all but one), so some are reading, applying or reporting at every
// kill whatever the number; 200 made each restart's reconnections and
// applies three times longer (28 s alone, 46 s beside the other packages).
const (
	restartAgents = 60
	restartRounds = 20
)

// upMesh is what mesh up runs in one process: a closed bus on a fixed port
// and data directory, and the controller that answers its callout; the
// agents reach it through a cutter on a fixed port of its own.
type upMesh struct {
	srv  *embedded.Server
	nc   *nats.Conn
	ctrl *commands.Controller
	cut  *embeddedtest.Cutter
}

// startUp starts the bus on port (-1: any) over busDir, the controller of
// home on it, with fresh bus keys as every mesh up makes, and the agents'
// way to it on agents ("127.0.0.1:0": any port).
func startUp(t *testing.T, busDir, home string, port int, agents string) *upMesh {
	t.Helper()
	keys, err := busauth.NewBusKeys()
	if err != nil {
		t.Fatal(err)
	}
	srv, err := embedded.Start(context.Background(), embedded.Options{Dir: busDir, Port: port, Auth: embedded.AuthOf(keys.Public())})
	if err != nil {
		t.Fatal(err)
	}
	nc, err := srv.Connect(keys.ControllerOption())
	if err != nil {
		srv.Close()
		t.Fatal(err)
	}
	ctrl, err := commands.StartController(context.Background(), nc, commands.ControllerConfig{Home: home, Callout: keys.Issuer, RolloutEvery: -1})
	if err != nil {
		nc.Close()
		srv.Close()
		t.Fatal(err)
	}
	u, err := url.Parse(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	return &upMesh{srv: srv, nc: nc, ctrl: ctrl, cut: embeddedtest.NewCutter(t, agents, u.Host)}
}

// kill takes the bus away as kill -9 of mesh up does: from this moment
// nothing it says reaches an agent, what was in flight is lost, and every
// connection is reset; the controller is stopped after, with no bus.
func (u *upMesh) kill() {
	u.cut.Deafen()
	u.srv.Close()
	u.cut.Close()
	u.nc.Close()
	u.ctrl.Close()
}

// Issue 28: with 300 agents following mesh up, killing and restarting it
// during pushes left 164 connected and deaf for good (a read of the newest
// declaration with no deadline). Here the bus and controller are killed at
// a random moment of a push twenty times and started again on the same
// port and data; right after each start a push lands, while agents are
// still connecting again, and every agent must apply it. The agents check
// unprompted only once an hour, so only a bounded read and the re-read
// after a reconnect can bring them there (removing either fails this).
func TestAFleetAppliesThroughBusRestarts(t *testing.T) {
	if testing.Short() {
		t.Skip("a fleet through twenty bus restarts")
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("kill moments drawn with seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	busDir, home := t.TempDir(), t.TempDir()
	up := startUp(t, busDir, home, -1, "127.0.0.1:0")
	defer func() { up.kill() }()
	u, err := url.Parse(up.srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	port, _ := strconv.Atoi(u.Port())
	agentsAt := up.cut.Addr()

	ctx := context.Background()
	names := make([]wire.EnrollRequest, restartAgents)
	for i := range names {
		names[i] = wire.EnrollRequest{Name: fmt.Sprintf("r-%03d", i), Capabilities: []string{"linux"}}
	}
	if _, err := up.ctrl.Nodes.EnrollBatch(ctx, wire.EnrollBatchRequest{CommandID: wire.NewCommandID(), Nodes: names}); err != nil {
		t.Fatal(err)
	}
	joins := make([]agent.Join, len(names))
	for i, n := range names {
		id, err := up.ctrl.Access.LegacyIdentity(n.Name)
		if err != nil {
			t.Fatal(err)
		}
		joins[i] = agent.Join{Mesh: id.Mesh, Bus: "nats://" + agentsAt, Node: n.Name, Key: id.Key, Seed: id.Seed}
	}
	var lastErr sync.Map // node -> the last error its connection was told of
	start, cancel := context.WithTimeout(ctx, embeddedtest.Settle)
	defer cancel()
	f, err := Start(start, Config{Joins: joins, Dir: t.TempDir(), CheckEvery: time.Hour,
		// Longer than any wait of the test: a read or report lost with
		// the bus must be ended by the drop itself (agent/line.go), at
		// once. When each waited out its timeout (a second here then),
		// twenty restarts cost the suite twenty seconds; with this bound
		// they would fail it.
		Timeout: 2 * embeddedtest.Settle,
		Connect: func(j agent.Join) (*nats.Conn, error) {
			identity, err := j.Options()
			if err != nil {
				return nil, err
			}
			// As mesh agent connects (for ever, through refusals while the
			// controller starts), with a short wait between tries so that
			// twenty restarts fit the suite.
			// The handshake waits for the controller's callout: bounded by
			// Settle, as every wait of the tests is, not nats.go's 2 s,
			// which a loaded box passed (i/o timeout at the fleet's start).
			return nats.Connect(j.Bus, append(identity, nats.Timeout(embeddedtest.Settle), nats.MaxReconnects(-1), nats.IgnoreAuthErrorAbort(),
				nats.ReconnectWait(10*time.Millisecond), nats.ReconnectJitter(40*time.Millisecond, 0),
				// Refusals while the controller starts are expected; the
				// client would print each one. The last is kept, and said
				// of an agent left behind (a subscription the bus refused
				// would leave it connected and deaf).
				nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { lastErr.Store(j.Node, err.Error()) }))...)
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Stop()

	// pushAll pushes every node and answers each one's sequence.
	pushAll := func(h *commands.Controller) map[string]uint64 {
		t.Helper()
		r, err := h.Push.Push(ctx, wire.PushRequest{CommandID: wire.NewCommandID()})
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Sent) != restartAgents {
			t.Fatalf("a push sent %d of %d nodes: %+v", len(r.Sent), restartAgents, r.Unsent)
		}
		want := map[string]uint64{}
		for _, s := range r.Sent {
			want[s.Node] = s.Sequence
		}
		return want
	}
	allApplied := func(round int, want map[string]uint64) {
		t.Helper()
		var stuck []string
		// Said if it fails: who was left behind, the first of them.
		defer func() {
			if len(stuck) > 0 {
				m := f.byNode[stuck[0]]
				told, _ := lastErr.Load(stuck[0])
				t.Logf("after restart %d, %d agent(s) had not applied, among them %s: sent sequence %d, its last report on %d (outcome %d), its connection %v, the last error it was told of %v; every goroutine's stack is in %s",
					round, len(stuck), stuck[0], want[stuck[0]], m.seq.Load(), m.outcome.Load(), m.nc.Status(), told, dumpStacks(t))
			}
		}()
		embeddedtest.Eventually(t, fmt.Sprintf("all %d agents to apply the push after restart %d", restartAgents, round), func() bool {
			stuck = stuck[:0]
			for node, seq := range want {
				m := f.byNode[node]
				if m.seq.Load() < seq || m.outcome.Load() != applied {
					stuck = append(stuck, node)
				}
			}
			return len(stuck) == 0
		})
	}
	allApplied(0, pushAll(up.ctrl))

	for round := 1; round <= restartRounds; round++ {
		// A push in flight, and the bus killed at a random moment of it:
		// once a random number of agents (none to all but one) applied
		// it, so the rest are reading, applying or reporting. A moment
		// drawn in time missed the agents' reads (about a tenth of a
		// second, sooner or later on a loaded box) more often than not.
		var pushing sync.WaitGroup
		h := up.ctrl
		before := make([]uint64, len(f.members))
		for i, m := range f.members {
			before[i] = m.seq.Load()
		}
		// Ended with the controller, as the service's deadline ends it: a
		// push killed after its appends waits for a fold that stopped, and
		// with no deadline waited for ever (the test hung at pushing.Wait).
		pctx, stopPush := context.WithCancel(ctx)
		pushing.Go(func() { h.Push.Push(pctx, wire.PushRequest{CommandID: wire.NewCommandID()}) })
		if k := rng.IntN(restartAgents); k > 0 {
			embeddedtest.Eventually(t, fmt.Sprintf("%d agents to apply push %d", k, round), func() bool {
				n := 0
				for i, m := range f.members {
					if m.seq.Load() > before[i] {
						n++
					}
				}
				return n >= k
			})
		}
		up.kill()
		stopPush()
		pushing.Wait()
		up = startUp(t, busDir, home, port, agentsAt)
		allApplied(round, pushAll(up.ctrl))
	}
	if n, first := f.Warnings(); n > 0 {
		t.Logf("the agents logged %d warning(s) through the restarts; the first: %s", n, first)
	}
}

// dumpStacks writes every goroutine's stack to a file that outlives the
// test and answers its path: a stuck agent is found by what its Run waits
// on, and the failure happens about once in several loaded runs.
func dumpStacks(t *testing.T) string {
	f, err := os.CreateTemp(embeddedtest.Outlives(), "mesh-restart-stacks-*.txt")
	if err != nil {
		return "(no file: " + err.Error() + ")"
	}
	defer f.Close()
	if err := pprof.Lookup("goroutine").WriteTo(f, 2); err != nil {
		t.Logf("cannot write the stacks: %v", err)
	}
	return f.Name()
}
