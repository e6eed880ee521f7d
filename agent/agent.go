package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/meshctl/mesh/agent/logbook"
	"github.com/meshctl/mesh/declaration"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/events/store"
	"github.com/nats-io/nats.go"
)

// Config is one agent: which node of which mesh, where its root and state are.
type Config struct {
	Join  Join
	Root  string
	State string // default: Root + ".state", beside the root, never inside it
	Log   *slog.Logger
	// RetryEvery is how often reports that could not be published are tried again.
	RetryEvery time.Duration
	// ReportTimeout bounds one attempt to publish a report (default 5s).
	ReportTimeout time.Duration
	// ReadTimeout bounds one read of the newest declaration (default
	// store.CallTimeout); a read the bus never answers is tried again.
	ReadTimeout time.Duration
	// CheckEvery is how often the agent reads its newest declaration
	// without being woken (default 1m): a backstop only, since it hears
	// each declaration the stream stores and reads again after any
	// reconnect.
	CheckEvery time.Duration
	// Observe, when set, is told what the agent does: that it follows its
	// subject, and each report it makes (Sent false: kept to send later).
	// It is called with the agent's lock held: it must not block. The
	// fleet harness measures a mesh with it.
	Observe func(Observation)
	// Supervision is how the programs of modules that run are kept
	// running (defaults in Supervision.withDefaults).
	Supervision Supervision
	// DriftEvery is how often the agent checks that what the mesh owns
	// under the root is still what it applied (default 3 minutes); it
	// also checks when it starts.
	DriftEvery time.Duration
	// DriftReport: a drift is reported and left as found, and the node is
	// drifted until the next apply. Otherwise (the default) it is put back
	// and reported as a corrective change.
	DriftReport bool
	// Facts detects the machine's facts and capabilities (default: the
	// detectors of facts.go); a test gives its own.
	Facts func() (map[string]string, []string)
	// LiveEvery is how often the agent says it is alive (default
	// events.LiveEvery); the controller calls a node silent for a few of
	// these unreachable.
	LiveEvery time.Duration
	// LogBytes bounds the output kept of each module's program: its
	// newest lines within this many bytes as stored (DefaultLogBytes when
	// 0, at least MinLogBytes), in memory and on disk (at most twice it
	// there), under State's logs directory.
	LogBytes int
	// Slots, when set, is shared by agents in one process: an agent holds
	// a slot from opening its root until its report is saved. Thousands of
	// agents standing in for thousands of machines share one descriptor
	// table, and an agent that cannot open its root reports failed; the
	// fleet harness bounds them with it so it measures the mesh, not the
	// table. Nil (every real agent): no bound.
	Slots chan struct{}
	// Systemctl tells systemd of the units the agent writes ("": systemctl in PATH).
	Systemctl string
	// ArtifactCacheBytes bounds the cache of artifacts under State
	// (DefaultArtifactCacheBytes when 0; artifact.go).
	ArtifactCacheBytes int64
	// Fetching, when set, is told each piece of an artifact as it is
	// written to the cache's temporary file (its digest, the bytes so
	// far), on the goroutine that fetches, which waits for it: a test
	// holds a fetch there part way, to kill the agent in the middle of it.
	Fetching func(digest string, written int64)
}

// Observation is one thing an agent did, for Config.Observe.
type Observation struct {
	Following bool         // Run is following the node's subject
	Report    events.Event // a report made, or nil
	Sent      bool         // the report reached the stream
}

// Agent applies one node's declarations.
type Agent struct {
	cfg Config
	st  *store.Store

	mu    sync.Mutex // state is changed by the declaration reader and the report retrier
	state *State

	// sealing proves each report the node's (rules 19 and 20): signed by
	// the agent's own report key, which only it holds, and MAC'd with the
	// key its join string gives it, which the controller checks cheaply.
	sealing store.Sealing
	// seal opens what a declaration carries sealed to this node (rule 21).
	seal opener

	// sup runs the programs of the modules that run.
	sup *supervisor
	// book keeps their recent output, which the operator reads (logs.go).
	book *logbook.Book
	// applied is the declaration applied last (nil before the first), and
	// failed the paths of it that failed: what a drift check compares the
	// root with. Both under mu.
	applied *declaration.Declaration
	failed  map[string]bool
	// drifted is the drift last reported while not correcting it: the
	// same drift is said once, not at every check.
	drifted string
	// line ends the bus calls in flight when the connection drops, while
	// Run runs (line.go).
	line atomic.Pointer[line]
	// verified is what drift checks found right, by path (applier.verified).
	verified map[string]fileStat
	// keys are the content keys of applied's files that printed secret
	// settings (contentKey), in memory only; nil when not asked for yet.
	keys map[string]contentKey
}

// Open prepares an agent on a connection to the mesh's bus: its root, its
// state, the stream. It does not read declarations yet: Run does.
func Open(ctx context.Context, nc *nats.Conn, cfg Config) (*Agent, error) {
	if cfg.Root == "" {
		return nil, errors.New("agent: no --root: give the directory declared paths land under")
	}
	// Absolute: the programs of modules that run are started in a
	// directory under the root and told where it is (MESH_ROOT); a
	// relative root would name another place from there.
	root, err := filepath.Abs(cfg.Root)
	if err != nil {
		return nil, fmt.Errorf("agent: cannot resolve the root %s: %w", cfg.Root, err)
	}
	cfg.Root = root
	if cfg.ArtifactCacheBytes <= 0 {
		cfg.ArtifactCacheBytes = DefaultArtifactCacheBytes
	}
	if cfg.State == "" {
		// Beside the root, never inside it: Clean, or "root/" would give "root/.state".
		cfg.State = filepath.Clean(cfg.Root) + ".state"
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.RetryEvery == 0 {
		cfg.RetryEvery = 2 * time.Second
	}
	if cfg.ReportTimeout == 0 {
		cfg.ReportTimeout = 5 * time.Second
	}
	if cfg.CheckEvery == 0 {
		cfg.CheckEvery = time.Minute
	}
	if cfg.DriftEvery == 0 {
		cfg.DriftEvery = 3 * time.Minute
	}
	if cfg.LiveEvery == 0 {
		cfg.LiveEvery = events.LiveEvery
	}
	if cfg.Facts == nil {
		cfg.Facts = detectFacts
	}
	if cfg.LogBytes == 0 {
		cfg.LogBytes = DefaultLogBytes
	}
	if cfg.LogBytes < MinLogBytes {
		return nil, fmt.Errorf("agent: a program's log kept within %d bytes cannot hold its longest lines; give at least %d KiB", cfg.LogBytes, MinLogBytes>>10)
	}
	if err := os.MkdirAll(cfg.Root, 0o755); err != nil {
		return nil, fmt.Errorf("agent: cannot create the root %s: %w", cfg.Root, err)
	}
	// The root is opened for each apply, not held: a fleet harness runs
	// ten thousand agents in one process, and a descriptor each, beside
	// their connections, passed the process's limit. Opening it here
	// refuses a root that cannot be opened before anything is read.
	opened, err := os.OpenRoot(cfg.Root)
	if err != nil {
		return nil, fmt.Errorf("agent: cannot open the root %s: %w", cfg.Root, err)
	}
	opened.Close()
	state, err := loadState(cfg.State, cfg.Join.Node)
	if err != nil {
		return nil, err
	}
	sealing, seal, err := loadSealing(cfg.State, cfg.Join)
	if err != nil {
		return nil, err
	}
	st, err := store.AttachNode(nc, "")
	if err != nil {
		return nil, err
	}
	st.Timeout = cfg.ReadTimeout
	a := &Agent{cfg: cfg, st: st, state: state, sealing: sealing, seal: seal}
	a.book = logbook.New(cfg.State, cfg.LogBytes, time.Now, cfg.Log)
	a.sup = &supervisor{s: cfg.Supervision.withDefaults(), root: cfg.Root, node: cfg.Join.Node, log: cfg.Log,
		report: a.reportRuntime, env: a.runtimeEnv, book: a.book, procs: map[string]*proc{}}
	return a, nil
}

// Close releases what the agent holds (nothing between applies).
func (a *Agent) Close() error { return nil }

// LastSequence is the highest sequence the agent has applied or tried.
func (a *Agent) LastSequence() uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.state.LastSequence
}

// Run reads the node's newest declaration (so an agent that was offline
// applies only the newest), then waits for the next: each declaration as
// the stream republishes it once stored (events.StoredPrefix), which it
// applies as heard, and a check every CheckEvery in case it missed one (a
// reconnect), which reads the newest by direct get. Never the publish
// itself, which a stream may refuse. No consumer per agent: a node's
// identity may create none (rule 18), and a fleet of them would be a
// thousand consumers on one stream (rule 25).
func (a *Agent) Run(ctx context.Context) error {
	subject := events.DeclarationSubject(a.cfg.Join.Node)
	defer a.watchLine(a.st.NC())()
	// Alive first: a node whose first read waits on a slow bus is not lost.
	bctx, stopBeat := context.WithCancel(ctx)
	beating := make(chan struct{})
	go func() { defer close(beating); a.beat(bctx) }()
	defer func() { stopBeat(); <-beating }()
	// Its programs' logs are served while it runs, from its start: a
	// program that cannot start says why there too.
	stopLogs, err := a.serveLogs(ctx)
	if err != nil {
		return fmt.Errorf("agent: cannot hear requests for its programs' logs: %w", err)
	}
	defer stopLogs()
	a.recordKey(ctx)
	a.flushPendingLocked(ctx)
	a.reportInterrupted(ctx) // after the reports kept before it, before any apply
	wake := make(chan struct{}, 1)
	// heard is the highest declaration number published on the subject
	// that this agent heard: what its reads owe it (see settled).
	var heard atomic.Uint64
	// pending is the newest declaration heard stored (the stream's
	// republish, events.StoredPrefix), not yet handled: applied as heard,
	// with no read of the bus.
	var pending atomic.Pointer[nats.Msg]
	stored := events.StoredSubject(a.cfg.Join.Node)
	sub, err := a.st.NC().Subscribe(stored, func(m *nats.Msg) {
		if n := heardNumber(m.Data); n > heard.Load() {
			heard.Store(n) // one callback at a time: nats.go delivers a subscription's messages in order
		}
		pending.Store(m)
		select {
		case wake <- struct{}{}:
		default: // one wake-up pending is enough: it reads the newest
		}
	})
	if err != nil {
		return fmt.Errorf("agent: cannot hear %s: %w", stored, err)
	}
	defer sub.Unsubscribe()
	// Any reconnect (the bus restarted, a closed bus ended the connection's
	// lifetime) may have lost a wake-up, or the answer to a read in flight:
	// the agent reads its newest declaration again at once rather than at
	// the next check (and a fleet checks rarely). A status listener, not
	// ReconnectedCB, which belongs to whoever made the connection. The
	// client sends its subscriptions again before anything published after
	// the reconnect, so the wake-up is heard again before that read lands.
	reconnected := a.st.NC().StatusChanged(nats.CONNECTED)
	defer a.st.NC().RemoveStatusListener(reconnected)
	// The server must have the subscription before the first read: a
	// declaration landing between the two would otherwise wait for the
	// next check.
	if err := a.st.NC().Flush(); err != nil {
		return fmt.Errorf("agent: cannot hear %s: %w", stored, err)
	}
	// seen is the message read last, by its event number and the time the
	// stream stored it: the number alone is not the message. A log that
	// went back (an older backup restored, a bus that lost its tail)
	// numbers the next declaration as it numbered one this agent read,
	// and an agent comparing numbers only took it for the one it had and
	// stayed behind, connected and silent, until the next push.
	var seen store.Msg
	var read uint64 // the declaration number of the message read last
	// consider handles last, the newest declaration, if it is new.
	consider := func(last store.Msg) (bool, error) {
		if last.Seq == seen.Seq && last.Time.Equal(seen.Time) {
			return false, nil
		}
		o, act, err := a.toAct(ctx, last)
		if err != nil {
			return false, err // seen stays: the next read asks again
		}
		if seen.Seq != 0 && last.Seq <= seen.Seq {
			// The log went back or was replaced: it may not hold this
			// agent's report key, without which every report of its would
			// be set aside. Recording it again is harmless where it does.
			a.cfg.Log.Warn(fmt.Sprintf("the log went back: its newest declaration for %s is event %d stored at %s, this agent read event %d stored at %s; recording its report key again",
				a.cfg.Join.Node, last.Seq, last.Time.UTC().Format(time.RFC3339Nano), seen.Seq, seen.Time.UTC().Format(time.RFC3339Nano)))
			a.recordKey(ctx)
		}
		if act && o.err == nil && !a.isApplied(o) {
			// Asked before seen moves: without an answer nothing is
			// applied, and the next read asks again.
			if o.keys, err = a.contentKeys(ctx, &o.d); err != nil {
				return false, &waitingForKeys{err}
			}
			if err := a.prepareArtifacts(ctx, &o); err != nil {
				return false, &waitingForKeys{err}
			}
		}
		seen, read = store.Msg{Seq: last.Seq, Time: last.Time}, o.seq
		if !act {
			return true, nil
		}
		if ap := a.handle(ctx, o); ap != nil {
			a.sup.reconcile(ap.runs, ap.changed, ap.hold, ap.seq)
		}
		return true, nil
	}
	// check reads the newest declaration and handles it if it is new.
	check := func() (bool, error) {
		lctx, done := a.onLine(ctx)
		last, found, err := a.st.Last(lctx, subject)
		done()
		if err != nil || !found {
			return false, dropped(lctx, err)
		}
		return consider(last)
	}
	// next handles the declaration heard stored, if one is pending;
	// otherwise it reads the newest. One stored no later than the one read
	// last is not the log going back but a wake-up a read overtook (the
	// read at start, or a check, found it or one after it first): acting
	// on it would apply an older declaration, and reading again would ask
	// the bus for what the agent has (the stream republishes in order).
	next := func() (bool, error) {
		if m := pending.Swap(nil); m != nil {
			if last, err := store.Republished(m); err == nil {
				if !last.Time.After(seen.Time) {
					return false, nil
				}
				return consider(last)
			}
		}
		return check()
	}
	// The programs stop with Run, and say so before the retrier stops.
	defer a.sup.stopAll()
	_, err = check()
	var waiting *waitingForKeys
	// A first read the drop of the connection cut (line.go) is asked
	// again as any failed read is: the agent keeps following. Returned,
	// it ended the agent for a bus restart it would have outlived.
	cut := errors.Is(err, errLineDropped)
	if err != nil && !errors.As(err, &waiting) && !cut {
		return err
	}
	a.checkDrift(ctx)
	a.cfg.Log.Info("agent following its declarations", "node", a.cfg.Join.Node, "subject", subject, "applied_up_to", a.LastSequence())
	a.observe(Observation{Following: true})
	// Facts after following, not before: a fleet starting at once (a
	// harness, a data centre after a power cut) follows first, and its
	// ten thousand fact reports do not delay any agent's first read. Its
	// first declaration may then miss a capability only facts give: the
	// report moves what it would be sent, and push --behind sends it.
	a.reportFacts(ctx)
	// The retrier stops with Run: nothing touches the state after Run returns.
	rctx, stopRetry := context.WithCancel(ctx)
	retried := make(chan struct{})
	go func() { defer close(retried); a.retryLoop(rctx) }()
	defer func() { stopRetry(); <-retried }()
	// The first check falls at a random point of its period, and each
	// after a whole period: ten thousand agents started together (a
	// harness, a data centre after a power cut) then read their newest
	// declarations spread over the period rather than in one burst each
	// time, which a bus felt as a second of a thousand gets.
	tick := time.NewTimer(rand.N(a.cfg.CheckEvery) + 1)
	defer tick.Stop()
	drift := time.NewTicker(a.cfg.DriftEvery)
	defer drift.Stop()
	// After a reconnect, which may have missed a republish, a read that
	// finds nothing new is tried again soon, a few times, doubling,
	// before the agent waits for the next (settled).
	again := time.NewTimer(0)
	<-again.C
	var backoff, failing time.Duration
	var woke time.Time // the wake-up (or reconnect) the tries after it answer
	var afterReconnect bool
	if waiting != nil || cut {
		// The first declaration waits for its content keys (no controller
		// answers yet), or its read was cut: the agent follows all the
		// same, and asks again.
		a.cfg.Log.Warn("cannot read the newest declaration; trying again until it can", "err", err)
		failing = wakeRetry
		again.Reset(failing)
	}
	// failing is how long after a failed read it is tried again: a read
	// the bus did not answer (each is bounded by store.CallTimeout) is
	// owed until one succeeds, however long the bus is away.
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-wake:
			backoff, woke = wakeRetry, time.Now()
		case <-reconnected:
			backoff, woke, afterReconnect = wakeRetry, time.Now(), true
		case <-tick.C:
			tick.Reset(a.cfg.CheckEvery)
		case <-again.C:
		case <-drift.C:
			a.reportFacts(ctx)
			a.checkDrift(ctx)
			continue
		}
		found, err := next()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if failing == 0 {
				a.cfg.Log.Warn("cannot read the newest declaration; trying again until it can", "err", err)
			}
			// A wake-up stays owed through failed reads: the read that
			// finally succeeds may still come before the stream stored what
			// woke the agent, and is then tried again as after any wake-up.
			// (It was forgotten here, and an agent whose read failed once on
			// a busy bus stayed behind until its next check.)
			failing = min(max(2*failing, wakeRetry), maxFailRetry)
			again.Reset(failing)
			continue
		}
		if failing > 0 {
			a.cfg.Log.Info("read the newest declaration again", "node", a.cfg.Join.Node)
			failing = 0
		}
		if h := heard.Load(); woke.IsZero() || settled(found, read, h, afterReconnect, time.Since(woke)) {
			// A number heard and never read in a whole window (a refused
			// publish, a log that went back) is owed no more.
			heard.CompareAndSwap(max(h, read), read)
			backoff, woke, afterReconnect = 0, time.Time{}, false
			// A try set before this wake-up was answered is owed no
			// more: left armed, it read the bus for nothing (one of
			// two declarations heard while the first was applied).
			again.Stop()
			continue
		}
		again.Reset(backoff)
		backoff = min(2*backoff, maxWakeRetry)
	}
}

// isApplied says whether o is the declaration this node applied last (taken
// up again after a restart, never applied twice).
func (a *Agent) isApplied(o opened) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return o.d.Sequence == a.state.LastSequence && o.digest == a.state.LastDigest
}

// handle applies one opened declaration message, or refuses it. Nothing of
// a refused declaration is written. It answers what the supervisor must
// do, nil for nothing.
func (a *Agent) handle(ctx context.Context, o opened) *applied {
	a.mu.Lock()
	defer a.mu.Unlock()
	node := a.cfg.Join.Node
	if o.err != nil {
		a.refuse(ctx, o.seq, o.digest, o.err.Error())
		return nil
	}
	d, digest := o.d, o.digest
	switch {
	case d.Sequence == a.state.LastSequence && digest == a.state.LastDigest:
		// This very declaration was applied before a restart: never
		// twice. Its programs run again, and drift is checked against it.
		if a.applied == nil {
			a.applied, a.keys = &d, nil
			return &applied{runs: d.Runs, seq: d.Sequence}
		}
		return nil
	case d.Sequence <= a.state.LastSequence:
		// Signed by the controller, yet numbered below what this node
		// applied: the log lost its tail (an older backup restored). The
		// refusal tells the controller the highest applied, and is believed
		// only with the report key in the log: record it (again).
		a.recordKeyLocked(ctx)
		a.refuse(ctx, d.Sequence, digest, fmt.Sprintf("sequence %d is at or below %d, the last this node applied: a replay", d.Sequence, a.state.LastSequence))
		return nil
	}
	if a.cfg.Slots != nil {
		a.cfg.Slots <- struct{}{}
		defer func() { <-a.cfg.Slots }()
	}
	root, err := os.OpenRoot(a.cfg.Root)
	if err != nil {
		// Nothing was applied: the report says why, and the next
		// declaration (or a push --behind) tries again.
		a.state.LastSequence, a.state.LastDigest = d.Sequence, digest
		a.send(ctx, reportID("a", d.Sequence, digest), events.DeclarationFailed{Node: node, Sequence: d.Sequence, Digest: digest,
			Failed: boundFailures([]events.ResourceFailure{{Path: "/", Reason: "cannot open the root: " + err.Error()}})})
		return nil
	}
	defer root.Close()
	ap := applier{root: root, state: a.state, node: a.cfg.Join.Node, seal: a.seal, keys: o.keys, owners: owners(a.applied), changedModules: map[string]bool{},
		cache: a.artifactDir(), refusedArtifacts: o.refusedArtifacts}
	ap.systemctlProgram, ap.ctx = a.cfg.Systemctl, ctx
	a.beginApply(d.Sequence, digest, ap.absentNew(d.Resources))
	changed, failed := ap.apply(d.Resources)
	a.applied, a.failed, a.drifted, a.verified, a.keys = &d, map[string]bool{}, "", map[string]fileStat{}, o.keys
	out := &applied{runs: d.Runs, changed: ap.changedModules, hold: map[string]bool{}, seq: d.Sequence}
	owner := owners(&d)
	for _, f := range failed {
		a.failed[f.Path] = true
		out.hold[owner[f.Path]] = true
	}
	a.state.LastSequence, a.state.LastDigest, a.state.Applying = d.Sequence, digest, nil
	var report events.Event = events.DeclarationApplied{Node: node, Sequence: d.Sequence, Digest: digest, Changed: changed}
	if len(failed) > 0 {
		report = events.DeclarationFailed{Node: node, Sequence: d.Sequence, Digest: digest, Failed: boundFailures(failed)}
		a.cfg.Log.Warn("resources failed", "sequence", d.Sequence, "failed", len(failed), "first", failed[0].Path, "why", failed[0].Reason)
	} else {
		a.cfg.Log.Info("applied", "sequence", d.Sequence, "resources", len(d.Resources), "changed", changed)
	}
	a.send(ctx, reportID("a", d.Sequence, digest), report)
	a.trimArtifacts(&d)
	return out
}

func (a *Agent) observe(o Observation) {
	if a.cfg.Observe != nil {
		a.cfg.Observe(o)
	}
}
