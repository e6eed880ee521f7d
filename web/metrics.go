package web

import (
	"context"
	"runtime"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/meshctl/mesh/commands"
	"github.com/meshctl/mesh/projections"
	"github.com/meshctl/mesh/wire"
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics is what /metrics exports. The mesh's state (nodes by state,
// standings, runtimes, foreign messages, the fold) is read from the same
// answer status gives at each scrape, so the two never disagree; what the
// controller does (verbs, pushes) is counted as it happens.
type Metrics struct {
	reg      *prometheus.Registry
	commands *prometheus.HistogramVec
	pushed   prometheus.Histogram
	pushTime prometheus.Histogram
	h        *commands.Controller // set by Start; nil until then
}

// NewMetrics makes the registry, with Go's and the process's own metrics.
func NewMetrics() *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry(),
		commands: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "mesh_command_duration_seconds",
			Help: "How long the controller took to answer a verb, by verb and wire code (\"\" for an answer).", Buckets: prometheus.ExponentialBuckets(0.0005, 4, 10)},
			[]string{"verb", "code"}),
		pushed: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "mesh_push_nodes_sent",
			Help: "Nodes sent a declaration by one push.", Buckets: prometheus.ExponentialBuckets(1, 4, 10)}),
		pushTime: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "mesh_push_duration_seconds",
			Help: "How long a push took, composing to every declaration folded.", Buckets: prometheus.ExponentialBuckets(0.001, 4, 10)}),
	}
	m.reg.MustRegister(m.commands, m.pushed, m.pushTime, prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}))
	return m
}

// Command counts a verb answered (commands.Metrics).
func (m *Metrics) Command(verb string, d time.Duration, code string) {
	m.commands.WithLabelValues(verb, code).Observe(d.Seconds())
}

// Push counts a push (commands.Metrics).
func (m *Metrics) Push(sent, _ int, d time.Duration) {
	m.pushed.Observe(float64(sent))
	m.pushTime.Observe(d.Seconds())
}

// build is what the binary says of its own build, read once.
var build = func() (b struct{ version, revision, goVersion string }) {
	b.version, b.revision, b.goVersion = "(devel)", "unknown", runtime.Version()
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return b
	}
	if info.Main.Version != "" {
		b.version = info.Main.Version
	}
	for _, s := range info.Settings {
		if s.Key == "vcs.revision" {
			b.revision = s.Value
		}
	}
	return b
}()

// mesh is the collector of the mesh's state, read at each scrape.
type mesh struct{ h *commands.Controller }

var (
	descNodes      = prometheus.NewDesc("mesh_nodes", "Active nodes, by state (as status says).", []string{"state"}, nil)
	descWell       = prometheus.NewDesc("mesh_well", "1 when status says the mesh is well, else 0.", nil, nil)
	descStandings  = prometheus.NewDesc("mesh_standings_failing", "Providers failing a consumer, by provider.", []string{"provider"}, nil)
	descRuntimes   = prometheus.NewDesc("mesh_runtimes", "Programs of modules that run, by state.", []string{"state"}, nil)
	descForeign    = prometheus.NewDesc("mesh_foreign_messages_open", "Foreign messages not acknowledged.", nil, nil)
	descFolded     = prometheus.NewDesc("mesh_events_folded_total", "The last event the read models hold (the stream's sequence).", nil, nil)
	descLag        = prometheus.NewDesc("mesh_fold_lag_events", "Events on the stream the read models do not hold yet.", nil, nil)
	descLagAge     = prometheus.NewDesc("mesh_fold_lag_seconds", "Age of the oldest event not folded yet (0 when caught up).", nil, nil)
	descCauses     = prometheus.NewDesc("mesh_not_well_causes", "Reasons beyond nodes and standings that the mesh is not well.", nil, nil)
	descRollout    = prometheus.NewDesc("mesh_rollout_nodes", "Nodes of a rollout under way, paused or halted (by its state and wave, 1-based).", []string{"rollout", "module", "state", "wave"}, nil)
	descLastHeard  = prometheus.NewDesc("mesh_node_last_heard_timestamp_seconds", "When each node's agent was last heard saying it is alive (unix seconds): by this controller, or before it started as the log says.", []string{"node"}, nil)
	descBound      = prometheus.NewDesc("mesh_node_unreachable_after_seconds", "The silence after which a node is unreachable (0: liveness off).", nil, nil)
	descFailing    = prometheus.NewDesc("mesh_failing_standings", "Providers' standings failing a consumer, all providers (0 included: mesh_standings_failing has no series then).", nil, nil)
	descRollouts   = prometheus.NewDesc("mesh_rollouts_open", "Rollouts under way, paused or halted (0 included: mesh_rollout_nodes has no series then).", nil, nil)
	descBuild      = prometheus.NewDesc("mesh_build_info", "The controller's build: 1, labelled with its version, commit and Go.", []string{"version", "revision", "goversion"}, nil)
	descReconciled = prometheus.NewDesc("mesh_reconciler_pushes_total", "Declarations the reconciler sent by itself since the controller started (0 while it is off: mesh up --reconcile).", nil, nil)
	descReconQueue = prometheus.NewDesc("mesh_reconciler_queued_nodes", "Behind nodes waiting for the reconciler's next window (0 while it is off).", nil, nil)
	descRolledOut  = prometheus.NewDesc("mesh_rollout_nodes_applied", "Nodes of that rollout that hold its build and applied it.", []string{"rollout", "module", "state", "wave"}, nil)
)

func (mesh) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descNodes, descWell, descStandings, descRuntimes, descForeign, descFolded, descLag, descLagAge, descCauses, descRollout, descRolledOut, descLastHeard, descBound, descFailing, descRollouts, descBuild, descReconciled, descReconQueue, descHealth, descUnhealthy} {
		ch <- d
	}
}

func (c mesh) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := c.h.Status.Status(ctx, wire.StatusRequest{})
	if err != nil {
		ch <- prometheus.NewInvalidMetric(descWell, err)
		return
	}
	states := map[wire.State]int{}
	for _, st := range wire.States {
		states[st] = 0 // every state is exported, zero or not: an alert on one must see it go to 0
	}
	for _, n := range s.Nodes {
		states[n.State]++
	}
	for st, n := range states {
		ch <- prometheus.MustNewConstMetric(descNodes, prometheus.GaugeValue, float64(n), string(st))
	}
	well := 0.0
	if s.Well {
		well = 1
	}
	ch <- prometheus.MustNewConstMetric(descWell, prometheus.GaugeValue, well)
	failing := map[string]int{}
	for _, st := range s.Standings {
		failing[st.Provider]++
	}
	for p, n := range failing {
		ch <- prometheus.MustNewConstMetric(descStandings, prometheus.GaugeValue, float64(n), p)
	}
	// A labelled family has no series at zero, and an alert on it cannot
	// tell none failing from a scrape that lost it: the totals always are.
	ch <- prometheus.MustNewConstMetric(descFailing, prometheus.GaugeValue, float64(len(s.Standings)))
	ch <- prometheus.MustNewConstMetric(descRollouts, prometheus.GaugeValue, float64(len(s.Rollouts)))
	ch <- prometheus.MustNewConstMetric(descBuild, prometheus.GaugeValue, 1, build.version, build.revision, build.goVersion)
	for node, at := range c.h.Live.LastHeardAll() {
		ch <- prometheus.MustNewConstMetric(descLastHeard, prometheus.GaugeValue, float64(at.UnixMilli())/1000, node)
	}
	ch <- prometheus.MustNewConstMetric(descBound, prometheus.GaugeValue, s.UnreachableAfter)
	// Both always exported, so that an alert on a reconciler that stopped
	// sending tells zero from a family gone.
	queued := 0
	if s.Reconciler != nil {
		queued = s.Reconciler.Queued
	}
	ch <- prometheus.MustNewConstMetric(descReconciled, prometheus.CounterValue, float64(c.h.Reconcile.Sent()))
	ch <- prometheus.MustNewConstMetric(descReconQueue, prometheus.GaugeValue, float64(queued))
	runtimes := map[string]int{projections.RuntimeRunning: 0, projections.RuntimeExited: 0, projections.RuntimeCrashLooping: 0, wire.RuntimeUnreachable: 0}
	for _, rt := range s.Runtimes {
		runtimes[rt.State]++
	}
	for st, n := range runtimes {
		ch <- prometheus.MustNewConstMetric(descRuntimes, prometheus.GaugeValue, float64(n), st)
	}
	collectHealth(ch, s.Runtimes)
	ch <- prometheus.MustNewConstMetric(descCauses, prometheus.GaugeValue, float64(len(s.Causes)))
	for _, r := range s.Rollouts {
		labels := []string{r.ID, r.Module, r.State, strconv.Itoa(r.Wave + 1)}
		ch <- prometheus.MustNewConstMetric(descRollout, prometheus.GaugeValue, float64(r.Total), labels...)
		ch <- prometheus.MustNewConstMetric(descRolledOut, prometheus.GaugeValue, float64(r.Applied), labels...)
	}
	// The count alone: listing every foreign message to count them read
	// each at every scrape.
	if err := c.h.Core.Proj.Read(func(v *projections.View) error {
		n, _, err := v.OpenForeign()
		if err == nil {
			ch <- prometheus.MustNewConstMetric(descForeign, prometheus.GaugeValue, float64(n))
		}
		return err
	}); err != nil {
		ch <- prometheus.NewInvalidMetric(descForeign, err)
	}
	if p, err := c.h.Status.ProjectionsStatus(ctx, wire.Empty{}); err == nil {
		ch <- prometheus.MustNewConstMetric(descFolded, prometheus.CounterValue, float64(p.Checkpoint))
		ch <- prometheus.MustNewConstMetric(descLag, prometheus.GaugeValue, float64(p.Lag))
		age := 0.0
		if p.Lag > 0 {
			if m, err := c.h.Core.Store.Get(ctx, p.Checkpoint+1); err == nil {
				age = time.Since(m.Time).Seconds()
			}
		}
		ch <- prometheus.MustNewConstMetric(descLagAge, prometheus.GaugeValue, age)
	}
}
