package access

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/meshctl/mesh/commands/core"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/projections"
	"github.com/meshctl/mesh/verdict"
)

// A flooding node (issue 29): the bus bounds what one message may be
// (busauth's payload limit) but not how many a second, and every report a
// node publishes is stored and folded by the controller, junk included (a
// node wrote 52-78 MB/s of foreign messages; the controller spent 2.2-2.9
// CPU seconds every 5 s on them). So the controller counts what the live
// fold reads on each node's report subjects, per window of the stream's
// clock, and past a bound no agent reaches it cuts the node's connections,
// refuses it at connect for a cool-down, and records NodeFlooded, which
// status names until the operator acknowledges it (docs/security.md,
// "Limits per identity").
const (
	// FloodWindow is the window the counts are kept over.
	FloodWindow = 5 * time.Second
	// FloodReports: an agent's busiest legitimate traffic is a report per
	// apply and two per program exit (a crash loop restarts each program
	// every second or more): ten crash-looping modules and a push every
	// second are under 110 reports in a window.
	FloodReports = 1_000
	// FloodBytes: a report is at most events.MaxReport (64 KiB; a failed
	// apply's reasons are kept within it), so 110 reports are at most
	// 7 MiB, and most are under a kilobyte.
	FloodBytes = 16 << 20
	// FloodForeign: an agent writes no foreign message unless its key was
	// lost (its reports until it records its new key at start), a handful.
	FloodForeign = 50
	// FloodCoolDown is how long a flooding node is refused at connect: long
	// enough that an attacker's reconnect loop costs a refusal a try, short
	// enough that an agent that misbehaved once is back by itself.
	FloodCoolDown = 10 * time.Minute
)

// FloodWatch counts each node's reports as the live fold reads them.
type FloodWatch struct {
	now   func() time.Time
	since time.Time // reports stored before this controller began are the past, replayed
	mu    sync.Mutex
	seen  map[string]*tally
	// cooling are the nodes cut, until when: they are refused at connect
	// at once, before their record is folded.
	cooling map[string]time.Time
	act     func(events.NodeFlooded) // nil until the handlers exist
}

type tally struct {
	from, to         time.Time
	reports, foreign int
	bytes            int64
}

// NewFloodWatch counts reports from now on, by the clock now; the
// projections call its Heard for each report they fold.
func NewFloodWatch(now func() time.Time) *FloodWatch {
	return &FloodWatch{now: now, since: now(), seen: map[string]*tally{}, cooling: map[string]time.Time{}}
}

// Heard counts one report; it runs on the folding goroutine, so a flood is
// acted on by another.
func (w *FloodWatch) Heard(m projections.Heard) {
	if m.Stored.Before(w.since) {
		return
	}
	w.mu.Lock()
	if until, ok := w.cooling[m.Node]; ok && w.now().Before(until) {
		w.mu.Unlock()
		return // cut already: what it sent before the cut is still arriving
	}
	t := w.seen[m.Node]
	if t == nil || m.Stored.Sub(t.from) >= FloodWindow {
		if len(w.seen) >= 1<<17 {
			clear(w.seen) // bounded: a fleet's windows start again, none is lost for long
		}
		t = &tally{from: m.Stored}
		w.seen[m.Node] = t
	}
	t.to = m.Stored
	t.reports++
	t.bytes += int64(m.Bytes)
	if m.Foreign {
		t.foreign++
	}
	flood := t.reports > FloodReports || t.bytes > FloodBytes || t.foreign > FloodForeign
	act := w.act
	var ev events.NodeFlooded
	if flood {
		ev = events.NodeFlooded{Node: m.Node, Reports: t.reports, Foreign: t.foreign, Bytes: t.bytes, From: t.from, To: t.to,
			Until: w.now().Add(FloodCoolDown)}
		w.cooling[m.Node] = ev.Until
		delete(w.seen, m.Node)
	}
	w.mu.Unlock()
	if flood && act != nil {
		go act(ev)
	}
}

// cooled is until when node is refused for a flood this controller saw.
func (w *FloodWatch) cooled(node string) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	until, ok := w.cooling[node]
	return until, ok && w.now().Before(until)
}

// flooded cuts node's connections, records the flood and says so, once.
func (h *Service) flooded(ev events.NodeFlooded) {
	ev.Cut = h.cutNode(ev.Node)
	how := "its connections are cut and it is refused at connect"
	if !ev.Cut {
		how = "it is refused at its next connect (this bus's connections are not the controller's to cut: it is a cluster's)"
	}
	h.Log.Warn(fmt.Sprintf("%s; %s until %s", verdict.Flooded(ev.Node, ev.Reports, ev.Foreign, ev.Bytes, ev.To.Sub(ev.From)), how, ev.Until.UTC().Format(time.RFC3339)))
	ctx, cancel := context.WithTimeout(events.WithBy(context.Background(), events.ActorController), time.Minute)
	defer cancel()
	if _, err := h.appendForeign(ctx, fmt.Sprintf("flood:%s:%d", ev.Node, ev.From.UnixNano()), ev); err != nil {
		h.Log.Error("cannot record a flood; the node stays refused until this controller stops", "node", ev.Node, "err", err)
	}
}

// cutNode drops the live connections of node's identity and of its
// modules' (NODE/MODULE: their standings are on its subjects too), where
// the bus is the controller's own; it answers whether it could.
func (h *Service) cutNode(node string) bool {
	if h.cutUsers == nil {
		return false
	}
	_, err := h.cutUsers(cutsNode(node))
	if err != nil {
		h.Log.Error("cannot cut a flooding node's connections", "node", node, "err", err)
		return false
	}
	return true
}

// floodRefusal is why node may not connect now, if it flooded: this
// controller's memory of the cut, or a flood in the log not yet past its
// cool-down (another controller's, or before a restart).
func (h *Service) floodRefusal(node string) error {
	until, cooling := time.Time{}, false
	if h.flood != nil {
		until, cooling = h.flood.cooled(node)
	}
	if !cooling {
		err := h.Proj.Read(func(v *projections.View) error {
			open, err := v.OpenFloods()
			for _, f := range open {
				if f.Node == node && h.Now().Before(f.Until) && f.Until.After(until) {
					until, cooling = f.Until, true
				}
			}
			return err
		})
		if err != nil {
			return err
		}
	}
	if !cooling {
		return nil
	}
	return fmt.Errorf("%s flooded its report subjects and is refused until %s; mesh foreign list shows what it wrote", node, until.UTC().Format(time.RFC3339))
}

// appendForeign appends ev to the foreign aggregate, expecting its version
// again after a conflict: a flood's record decides nothing that another
// writer of the aggregate could change. It does not wait for the fold,
// which a flood may hold back: no reread, each attempt reads the
// aggregate's version from the log.
func (h *Service) appendForeign(ctx context.Context, commandID string, ev events.Event) (uint64, error) {
	agg := events.ForeignAggregate()
	var seq uint64
	err := core.DecideAndAppend(ctx, "add a "+ev.EventType()+" to", "the foreign messages' record", nil, func(int) error {
		version, err := h.Store.Version(ctx, agg)
		if err != nil {
			return err
		}
		seq, err = h.Store.Append(ctx, agg, version, commandID, ev)
		return err
	})
	return seq, err
}
