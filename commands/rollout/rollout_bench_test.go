package rollout

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/meshctl/mesh/commands/core"
	"github.com/meshctl/mesh/commands/core/coretest"
	"github.com/meshctl/mesh/commands/liveness"
	"github.com/meshctl/mesh/commands/push"
	"github.com/meshctl/mesh/commands/status"
	"github.com/meshctl/mesh/commands/world"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/manifest"
	"github.com/meshctl/mesh/projections"
	"github.com/meshctl/mesh/wire"
)

// pushClock sums the time the controller spends in pushes, as /metrics is
// told it.
type pushClock struct {
	mu   sync.Mutex
	in   time.Duration
	sent int
}

func (p *pushClock) Command(string, time.Duration, string) {}
func (p *pushClock) Push(sent, _ int, d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.in += d
	p.sent += sent
}

// BenchmarkRollout is a rollout over 10,000 nodes in 4 waves (a canary of
// one, 10%, 50%, the rest), driven as a controller's timer drives it,
// with every agent simulated by appending its signed report as soon as
// its declaration is sent. Issue 17's target: its bookkeeping (starting
// it, every step, moving each node's build, reading the reports, the
// gates) under 2 s beyond the pushes themselves. It reports the whole
// rollout's time, the time in its pushes, the time the simulated agents
// took to publish their reports, and the bookkeeping: the first less the
// other two. One push of the whole fleet in the same run is the ratio's
// other side.
func BenchmarkRollout(b *testing.B) {
	ctx := context.Background()
	bm := coretest.New(b, true)
	build := func(i int) manifest.Manifest {
		m, err := manifest.Parse([]byte(fmt.Sprintf(`{"module":"app","resources":[
		  {"kind":"directory","path":"/etc/app","mode":"0755"},
		  {"kind":"file","path":"/etc/app/app.conf","mode":"0644","template":"node = {{.Node.Name}}\nbuild = %d\n"}]}`, i)))
		if err != nil {
			b.Fatal(err)
		}
		return m
	}
	register := func(m manifest.Manifest) {
		bm.Publish(events.ModuleAggregate("app"), events.ModuleRegistered{Module: "app", Build: m.Build(), Manifest: m.Canonical()})
	}
	first := build(0)
	register(first)
	nodes := coretest.Nodes(10_000)
	for i := range nodes {
		name := fmt.Sprintf("web-%05d", i)
		bm.Publish(events.NodeAggregate(name), events.NodeEnrolled{Name: name, Capabilities: []string{}, Labels: map[string]string{}})
		bm.Publish(events.NodeAggregate(name), events.ModuleAssigned{Node: name, Module: "app", Build: first.Build(), Settings: map[string]string{}, Policy: events.PolicyManual})
		bm.Report(name, events.ReportKeyRecorded{Node: name, Key: bm.Agent.PublicKey()})
	}
	h := over(bm.Fold())
	clock := &pushClock{}
	h.Metrics = clock

	// applyAll is every agent applying what it was sent and not yet
	// reported on, its report appended; answers how long publishing took.
	applyAll := func() time.Duration {
		var sent []projections.Node
		if err := h.Proj.Read(func(v *projections.View) error {
			rows, err := v.Nodes()
			for _, r := range rows {
				if r.LastSent != nil && (r.LastReport == nil || r.LastReport.Sequence < r.LastSent.Sequence) {
					sent = append(sent, r)
				}
			}
			return err
		}); err != nil {
			b.Fatal(err)
		}
		t0 := time.Now()
		for _, r := range sent {
			bm.Report(r.Name, events.DeclarationApplied{Node: r.Name, Sequence: r.LastSent.Sequence, Digest: r.LastSent.Digest})
		}
		<-bm.JS.PublishAsyncComplete()
		return time.Since(t0)
	}
	full := time.Now()
	if r, err := h.push.Push(ctx, wire.PushRequest{CommandID: wire.NewCommandID()}); err != nil || len(r.Sent) != nodes {
		b.Fatalf("the first push: %v, %d sent", err, len(r.Sent))
	}
	fullPush := time.Since(full)
	applyAll()

	waves := []wire.WaveSpec{{Name: "canary", Selector: "name=web-00000"}, {Name: "some", Selector: "10%"}, {Name: "half", Selector: "50%"}, {Name: "rest", Selector: "*"}}
	var total, pushes, agents, during time.Duration
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		register(build(i + 1))
		<-bm.JS.PublishAsyncComplete()
		if err := h.CatchUp(ctx); err != nil {
			b.Fatal(err)
		}
		clock.in, clock.sent = 0, 0
		b.StartTimer()
		t0 := time.Now()
		ro, err := h.StartRollout(ctx, wire.RolloutRequest{CommandID: wire.NewCommandID(), Module: "app", Waves: waves})
		if err != nil {
			b.Fatal(err)
		}
		for ro.State == projections.RolloutRunning {
			if err := h.DriveRollouts(ctx); err != nil {
				b.Fatal(err)
			}
			if ro.Wave == 0 {
				// Status while the rollout runs names every held node
				// (each step moves the rollouts' version, so it is not
				// answered from the cache): timed, and kept out of the
				// bookkeeping.
				t1 := time.Now()
				if _, err := h.status.Status(ctx, wire.StatusRequest{Brief: true}); err != nil {
					b.Fatal(err)
				}
				during = time.Since(t1)
				t0 = t0.Add(during)
			}
			agents += applyAll()
			if ro, err = h.rollout(ro.ID); err != nil {
				b.Fatal(err)
			}
		}
		total += time.Since(t0)
		pushes += clock.in
		if ro.State != projections.RolloutFinished || clock.sent != nodes {
			b.Fatalf("the rollout ended %s at wave %d (%s), %d of %d nodes sent", ro.State, ro.Wave, ro.Why, clock.sent, nodes)
		}
	}
	b.StopTimer()
	n := float64(b.N)
	b.ReportMetric(total.Seconds()/n, "s/rollout")
	b.ReportMetric(pushes.Seconds()/n, "s-pushes/rollout")
	b.ReportMetric(agents.Seconds()/n, "s-agents/rollout")
	b.ReportMetric((total-pushes-agents).Seconds()/n, "s-bookkeeping/rollout")
	b.ReportMetric(fullPush.Seconds(), "s/push-of-all")
	b.ReportMetric(float64(during.Milliseconds()), "status-ms-during")
}

// over is the rollouts over c with push and status of their own.
func over(c *core.Core) *Service {
	w := world.New(c)
	p := push.New(c, w)
	return New(c, w, p, status.New(c, w, liveness.New(c), p))
}
