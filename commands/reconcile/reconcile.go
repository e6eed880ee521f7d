package reconcile

import (
	"cmp"
	"context"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/meshctl/mesh/commands/core"
	"github.com/meshctl/mesh/commands/world"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/wire"
)

// Pusher sends nodes their declarations (package push): the reconciler
// has no send of its own, so what it sends is numbered, signed, held to
// hand declarations and appended exactly as a person's push.
type Pusher interface {
	Push(ctx context.Context, r wire.PushRequest) (wire.PushReply, error)
}

// Config is the reconciler's bound. The zero Config is off.
type Config struct {
	// Rate is how many declarations it sends at most each Every; 0 (or
	// less) turns the reconciler off.
	Rate int
	// Every is the window of the rate (default a second). Negative: the
	// reconciler does not tick by itself, and a test calls Tick.
	Every time.Duration
	// Backstop is how often it judges every node even when no event
	// asked it to (default DefaultBackstop): what it missed (a fault
	// between a look and its send) is found within this bound.
	Backstop time.Duration
}

// DefaultBackstop bounds how long a behind node can go unnoticed.
const DefaultBackstop = 10 * time.Minute

// Service is the reconciler over one Core.
type Service struct {
	*core.Core
	world *world.Composer
	push  Pusher
	cfg   Config

	mu sync.Mutex
	// seen are the read models' marks at the last look: a look with none
	// moved does nothing, and only a moved composition or rollout judges
	// every node again.
	seen  marks
	swept time.Time
	// queue are the nodes due, oldest first, each once; left the nodes
	// behind it leaves to people, with why.
	queue []string
	left  map[string]string
	// awaiting are the nodes it sent that have not reported on it yet,
	// with when: judged at each look until they do, so that status says
	// at once that one refused or failed it, and forgotten after the
	// backstop, so that nodes with no agent do not make every look read
	// them.
	awaiting map[string]time.Time
	sent     atomic.Uint64
}

// marks are what tells the reconciler something happened: the fold's
// checkpoint, the composition version, the newest rollout step, the
// newest drift report and the newest liveness change.
type marks struct {
	checkpoint, composition, rollouts, drift, liveness uint64
}

// New is the reconciler over c, composing through w and sending through
// p, off until Start.
func New(c *core.Core, w *world.Composer, p Pusher) *Service {
	return &Service{Core: c, world: w, push: p, left: map[string]string{}, awaiting: map[string]time.Time{}}
}

// Start turns the reconciler on with cfg, ticking every window unless
// cfg.Every is negative; stop ends the ticking. A cfg with no rate leaves
// it off.
func (h *Service) Start(cfg Config) (stop func()) {
	if cfg.Rate <= 0 {
		return func() {}
	}
	cfg.Every, cfg.Backstop = cmp.Or(cfg.Every, time.Second), cmp.Or(cfg.Backstop, DefaultBackstop)
	h.mu.Lock()
	h.cfg = cfg
	h.mu.Unlock()
	h.Log.Info("reconciling: behind nodes are sent their latest declaration", "rate", cfg.Rate, "every", cfg.Every)
	if cfg.Every < 0 {
		return func() {}
	}
	return h.TickUntilStopped(cfg.Every, "cannot reconcile; trying again", h.Tick)
}

// On says whether the reconciler was started.
func (h *Service) On() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.cfg.Rate > 0
}

// Sent is how many declarations the reconciler sent since it started.
func (h *Service) Sent() uint64 { return h.sent.Load() }

// Tick is one window: it looks at what the read models folded since the
// last, then sends at most the rate of the nodes due, oldest first. A
// controller that may not write (the fold stopped, the bus in trouble, the
// past) sends nothing.
func (h *Service) Tick(ctx context.Context) error {
	if !h.On() || h.Past || h.Writable() != nil {
		return nil
	}
	// What it sends, the log credits to the reconciler, never a person.
	ctx = events.WithBy(ctx, events.ActorReconciler)
	if err := h.look(); err != nil {
		return err
	}
	batch := h.take()
	if len(batch) == 0 {
		return nil
	}
	// Once: a node moved between composing and appending (an assignment,
	// another controller's send) is left for the next look, which the
	// move itself wakes, rather than composed again within this window.
	r, err := h.push.Push(ctx, wire.PushRequest{CommandID: wire.NewCommandID(), Nodes: batch, By: events.ByReconciler, Once: true})
	h.sent.Add(uint64(len(r.Sent)))
	h.mu.Lock()
	sent := map[string]bool{}
	for _, p := range r.Sent {
		h.awaiting[p.Node], sent[p.Node] = h.Now(), true
	}
	if err != nil {
		// A push that failed (the bus in trouble, the deadline) may have
		// landed nothing, and so woken no look: its nodes go back to the
		// front, not to the backstop's sweep.
		var back []string
		for _, n := range batch {
			if !sent[n] && !slices.Contains(h.queue, n) {
				back = append(back, n)
			}
		}
		h.queue = append(back, h.queue...)
	}
	h.mu.Unlock()
	if len(r.Sent) > 0 {
		h.Log.Info("reconciled", "sent", len(r.Sent), "unsent", len(r.Unsent), "queued", h.queued())
	}
	return err
}

// take removes the next batch, at most the rate, from the queue.
func (h *Service) take() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := min(h.cfg.Rate, len(h.queue))
	batch := slices.Clone(h.queue[:n])
	h.queue = h.queue[n:]
	return batch
}

func (h *Service) queued() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.queue)
}

// Reconciling is what status says of the reconciler: nil when it is off.
func (h *Service) Reconciling() *wire.ReconcilerStatus {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.cfg.Rate <= 0 {
		return nil
	}
	s := &wire.ReconcilerStatus{AtMost: h.cfg.Rate, EverySeconds: max(h.cfg.Every, time.Second).Seconds(), Queued: len(h.queue),
		Next: append([]string{}, h.queue[:min(shown, len(h.queue))]...), Sent: h.sent.Load(), Left: []wire.UnsentNode{}, LeftCount: len(h.left)}
	if h.cfg.Every > 0 {
		s.EverySeconds = h.cfg.Every.Seconds()
	}
	for _, n := range slices.Sorted(maps.Keys(h.left)) {
		if len(s.Left) == shown {
			break
		}
		s.Left = append(s.Left, wire.UnsentNode{Node: n, Reason: h.left[n]})
	}
	return s
}

// shown is how many queued and left nodes status names.
const shown = 10
