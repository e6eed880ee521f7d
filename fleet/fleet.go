package fleet

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/meshctl/mesh/agent"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/fanout"
	"github.com/nats-io/nats.go"
)

// Config is a fleet: one join string per agent, and where their roots go.
type Config struct {
	Joins []agent.Join
	// Dir holds each agent's root (Dir/NODE) and state (Dir/NODE.state).
	Dir string
	// Connect dials the bus as one node (its identity from the join).
	Connect func(agent.Join) (*nats.Conn, error)
	// Dial dials the bus for an agent's enrolment, with the options
	// agent.Enrol gives (its new key and its token). A join with a token
	// and no seed is enrolled so, with keys its agent makes in its own
	// state directory, as an operator's machine is (issue 29): then the
	// fold holds each of its reports to that agent's own signature, which
	// a join with a seed derived from the controller key never costs.
	Dial func(j agent.Join, opts ...nats.Option) (*nats.Conn, error)
	// Parallel bounds connections being opened at once (default 64): a
	// closed bus checks each against the controller.
	Parallel int
	// Applying bounds agents applying at once (agent.Config.Slots); 0: no
	// bound. mesh fleet sets it from the process's open-file limit.
	Applying int
	// CheckEvery is each agent's unprompted read of its newest
	// declaration (default: the agent's own).
	CheckEvery time.Duration
	// Timeout bounds each agent's read and report on the bus (default:
	// the agent's own).
	Timeout time.Duration
}

// rootDir is node's agent's root in a fleet's dir.
func rootDir(dir, node string) string { return filepath.Join(dir, node) }

// StateDir is node's agent's state directory in a fleet's dir (the
// agent's own default beside its root): where its keys are once enrolled
// (agent.Enrolled).
func StateDir(dir, node string) string { return agent.StateDir(rootDir(dir, node), "") }

// Fleet is the running agents.
type Fleet struct {
	members []*member
	byNode  map[string]*member
	// changed is signalled (never blocking) whenever an agent reports.
	changed  chan struct{}
	warnings warnings
	// Every report answering a declaration, by outcome, and when the
	// latest was made: what NextRound counts.
	counts  [4]atomic.Int64
	lastAt  atomic.Int64
	cancel  context.CancelFunc
	running sync.WaitGroup
}

type member struct {
	node string
	nc   *nats.Conn
	ag   *agent.Agent
	// The agent's last report: its sequence, outcome and when it was made.
	seq     atomic.Uint64
	outcome atomic.Int32
	at      atomic.Int64
	follows atomic.Bool
}

// Outcomes of a member's last report.
const (
	none int32 = iota
	applied
	failed
	refused
)

// Start connects and opens every agent, runs them, and returns once each
// follows its subject (or ctx ends, or one cannot start).
func Start(ctx context.Context, cfg Config) (*Fleet, error) {
	if cfg.Parallel <= 0 {
		cfg.Parallel = 64
	}
	f := &Fleet{byNode: map[string]*member{}, changed: make(chan struct{}, 1)}
	for _, j := range cfg.Joins {
		if f.byNode[j.Node] != nil {
			return nil, fmt.Errorf("fleet: node %s is given twice", j.Node)
		}
		m := &member{node: j.Node}
		f.members = append(f.members, m)
		f.byNode[j.Node] = m
	}
	log := slog.New(&f.warnings)
	var slots chan struct{}
	if cfg.Applying > 0 {
		slots = make(chan struct{}, cfg.Applying)
	}
	// Open every agent, a bounded number at once; the first to fail (in
	// the order given) is the answer, and every one opened is closed.
	errs := make([]error, len(cfg.Joins))
	fanout.Each(len(cfg.Joins), cfg.Parallel, func(i int) {
		errs[i] = f.open(ctx, cfg, cfg.Joins[i], f.members[i], log, slots)
	})
	for _, err := range errs {
		if err != nil {
			f.closeAll()
			return nil, err
		}
	}
	runCtx, cancel := context.WithCancel(context.Background())
	f.cancel = cancel
	for _, m := range f.members {
		f.running.Go(func() {
			if err := m.ag.Run(runCtx); err != nil {
				f.warnings.Handle(runCtx, slog.NewRecord(time.Now(), slog.LevelError, m.node+": "+err.Error(), 0))
			}
		})
	}
	for f.Following() < len(f.members) {
		select {
		case <-ctx.Done():
			f.Stop()
			return nil, fmt.Errorf("fleet: %d of %d agents were following when it gave up: %w", f.Following(), len(f.members), ctx.Err())
		case <-f.changed:
		}
	}
	return f, nil
}

func (f *Fleet) open(ctx context.Context, cfg Config, j agent.Join, m *member, log *slog.Logger, slots chan struct{}) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if j.Seed == "" {
		if cfg.Dial == nil {
			return fmt.Errorf("fleet: %s has neither a key nor a way to enrol one", j.Node)
		}
		given := j
		enrolled, err := agent.Enrol(ctx, given, StateDir(cfg.Dir, j.Node), func(opts ...nats.Option) (*nats.Conn, error) {
			return cfg.Dial(given, opts...)
		}, log)
		if err != nil {
			return fmt.Errorf("fleet: %s cannot enrol: %w", j.Node, err)
		}
		j = enrolled
	}
	nc, err := cfg.Connect(j)
	if err != nil {
		return fmt.Errorf("fleet: %s cannot connect: %w", j.Node, err)
	}
	ag, err := agent.Open(ctx, nc, agent.Config{
		Join: j, Root: rootDir(cfg.Dir, j.Node), Log: log, CheckEvery: cfg.CheckEvery, Slots: slots,
		ReadTimeout: cfg.Timeout, ReportTimeout: cfg.Timeout,
		Observe: func(o agent.Observation) { f.observe(m, o) },
	})
	if err != nil {
		nc.Close()
		return err
	}
	m.nc, m.ag = nc, ag
	return nil
}

// observe keeps an agent's last report; it runs under the agent's lock.
func (f *Fleet) observe(m *member, o agent.Observation) {
	var seq uint64
	var outcome int32
	switch ev := o.Report.(type) {
	case nil:
		m.follows.Store(o.Following)
	case events.DeclarationApplied:
		seq, outcome = ev.Sequence, applied
	case events.DeclarationFailed:
		seq, outcome = ev.Sequence, failed
	case events.DeclarationRefused:
		seq, outcome = ev.Sequence, refused
	default:
		return // a report key, a standing: not an answer to a declaration
	}
	if o.Report != nil && !m.record(seq, outcome) {
		return
	}
	f.counts[m.outcome.Load()].Add(1)
	f.lastAt.Store(m.at.Load())
	select {
	case f.changed <- struct{}{}:
	default:
	}
}

// record keeps a report as the member's last, and says whether it is
// news. A report kept while the bus was away is observed again when it is
// finally sent, after reports on newer declarations: taken as the last,
// it made an agent that applied the newest look behind for ever.
func (m *member) record(seq uint64, outcome int32) bool {
	if last := m.seq.Load(); seq < last || seq == last && outcome == m.outcome.Load() && m.at.Load() != 0 {
		return false
	}
	m.seq.Store(seq)
	m.outcome.Store(outcome)
	m.at.Store(time.Now().UnixNano())
	return true
}

// Len is how many agents the fleet runs.
func (f *Fleet) Len() int { return len(f.members) }

// Following is how many agents follow their subject.
func (f *Fleet) Following() int {
	n := 0
	for _, m := range f.members {
		if m.follows.Load() {
			n++
		}
	}
	return n
}

// Has reports whether node is one of this fleet's agents.
func (f *Fleet) Has(node string) bool { return f.byNode[node] != nil }

// Round is how a fleet answered one round of declarations.
type Round struct {
	Applied, Failed, Refused int
	// First and Last are when the first and the last of its reports were
	// made (First only from NextRound).
	First, Last time.Time
}

// NextRound waits for the agents to report, then for quiet reports, and
// says how many reports came between, and over how long: a push from
// another shell, timed from the fleet's side.
func (f *Fleet) NextRound(ctx context.Context, quiet time.Duration) (Round, error) {
	select {
	case <-f.changed: // a signal from before this round
	default:
	}
	var before [4]int64
	for i := range before {
		before[i] = f.counts[i].Load()
	}
	select {
	case <-ctx.Done():
		return Round{}, ctx.Err()
	case <-f.changed:
	}
	r := Round{First: time.Unix(0, f.lastAt.Load())}
	t := time.NewTimer(quiet)
	defer t.Stop()
	for done := false; !done; {
		select {
		case <-ctx.Done():
			return Round{}, ctx.Err()
		case <-f.changed:
			t.Reset(quiet)
		case <-t.C:
			done = true
		}
	}
	r.Applied = int(f.counts[applied].Load() - before[applied])
	r.Failed = int(f.counts[failed].Load() - before[failed])
	r.Refused = int(f.counts[refused].Load() - before[refused])
	r.Last = time.Unix(0, f.lastAt.Load())
	return r, nil
}

// Await waits until every node in want has reported on at least the
// sequence want gives it (applied, failed or refused), and says how.
func (f *Fleet) Await(ctx context.Context, want map[string]uint64) (Round, error) {
	for node := range want {
		if f.byNode[node] == nil {
			return Round{}, fmt.Errorf("fleet: %s is not one of this fleet's agents", node)
		}
	}
	for {
		// Take the signal first: a report after the count is then not missed.
		select {
		case <-f.changed:
		default:
		}
		var r Round
		waiting := 0
		for node, seq := range want {
			m := f.byNode[node]
			if m.seq.Load() < seq {
				waiting++
				continue
			}
			switch m.outcome.Load() {
			case applied:
				r.Applied++
			case failed:
				r.Failed++
			case refused:
				r.Refused++
			}
			if at := time.Unix(0, m.at.Load()); at.After(r.Last) {
				r.Last = at
			}
		}
		if waiting == 0 {
			return r, nil
		}
		select {
		case <-ctx.Done():
			return r, fmt.Errorf("fleet: %d of %d agents had not reported when it gave up: %w", waiting, len(want), ctx.Err())
		case <-f.changed:
		}
	}
}

// Warnings is how many warnings and errors the agents logged, and the first.
func (f *Fleet) Warnings() (int, string) { return f.warnings.count() }

// Stop ends every agent and closes its connection.
func (f *Fleet) Stop() {
	if f.cancel != nil {
		f.cancel()
	}
	f.running.Wait()
	f.closeAll()
}

func (f *Fleet) closeAll() {
	for _, m := range f.members {
		if m.ag != nil {
			m.ag.Close()
		}
		if m.nc != nil {
			m.nc.Close()
		}
	}
}

// warnings is the agents' log: ten thousand agents' lines would bury the
// figures, so it counts what went wrong and keeps the first.
type warnings struct {
	mu    sync.Mutex
	n     int
	first string
}

func (w *warnings) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (w *warnings) Handle(_ context.Context, r slog.Record) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.n == 0 {
		w.first = r.Message
	}
	w.n++
	return nil
}
func (w *warnings) note(msg string) {
	w.Handle(context.Background(), slog.NewRecord(time.Now(), slog.LevelWarn, msg, 0))
}
func (w *warnings) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w *warnings) WithGroup(string) slog.Handler      { return w }
func (w *warnings) count() (int, string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.n, w.first
}
