package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/meshctl/mesh/events"
	"github.com/nats-io/nats.go"
)

// What the agent says back: a refusal, each report sent or kept until the
// bus takes it, and the bounds that keep a report within what the bus and
// the fold accept.

func (a *Agent) refuse(ctx context.Context, seq uint64, digest, reason string) {
	a.cfg.Log.Warn("refused", "sequence", seq, "why", reason)
	ev := events.DeclarationRefused{Node: a.cfg.Join.Node, Sequence: seq, Digest: digest, Reason: bound(reason, maxReason*2), Highest: a.state.LastSequence}
	// A refusal's id differs from an apply's of the same declaration: a
	// replay refused after it was applied must not be taken for a resend.
	a.send(ctx, reportID("r", seq, digest), ev)
}

// reportID makes a resent report (after the bus came back) a duplicate of
// itself and of nothing else.
func reportID(kind string, seq uint64, digest string) string {
	if len(digest) > 16 {
		digest = digest[:16]
	}
	return fmt.Sprintf("rep.%s.%d.%s.%d", kind, seq, digest, time.Now().UnixNano())
}

// send publishes a report, or keeps it in the state for later: a report is
// never lost because the bus was away when it was made.
func (a *Agent) send(ctx context.Context, id string, ev events.Event) {
	err := a.report(ctx, id, ev)
	if err != nil {
		a.cfg.Log.Warn("report kept to send later", "err", err)
		b, _ := json.Marshal(ev)
		a.state.Pending = append(a.state.Pending, Pending{ID: id, Type: ev.EventType(), Event: b})
	}
	a.observe(Observation{Report: ev, Sent: err == nil})
	if err := a.state.save(a.cfg.State); err != nil {
		a.cfg.Log.Error(err.Error())
	}
}

// flushPending publishes kept reports, oldest first, and stops at the first
// that still cannot go.
func (a *Agent) flushPending(ctx context.Context) {
	for len(a.state.Pending) > 0 {
		p := a.state.Pending[0]
		ev, err := events.DecodeData(p.Type, p.Event)
		if err != nil {
			a.cfg.Log.Error("dropping a kept report that cannot be read", "err", err)
		} else if err := a.report(ctx, p.ID, ev); err != nil {
			return
		} else {
			a.observe(Observation{Report: ev, Sent: true})
		}
		a.state.Pending = a.state.Pending[1:]
		if err := a.state.save(a.cfg.State); err != nil {
			a.cfg.Log.Error(err.Error())
			return
		}
	}
}

func (a *Agent) report(ctx context.Context, id string, ev events.Event) error {
	ctx, done := a.onLine(ctx)
	defer done()
	ctx, cancel := context.WithTimeout(ctx, a.cfg.ReportTimeout)
	defer cancel()
	_, err := a.st.Report(ctx, a.cfg.Join.Node, id, ev, a.sealing)
	return dropped(ctx, err)
}

func (a *Agent) retryLoop(ctx context.Context) {
	t := time.NewTicker(a.cfg.RetryEvery)
	defer t.Stop()
	// Reports kept while the bus was away go as soon as it is back, not
	// at the next tick: a report a drop cut (line.go) is one of them.
	back := a.st.NC().StatusChanged(nats.CONNECTED)
	defer a.st.NC().RemoveStatusListener(back)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-back:
		}
		a.flushPendingLocked(ctx)
	}
}

func (a *Agent) flushPendingLocked(ctx context.Context) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.flushPending(ctx)
}

// A report stays within events.MaxReport, however many resources failed and
// however long their reasons: the bus refuses a node's larger publish, and
// a report that never lands says nothing. Failures take at most half of it,
// as JSON encodes them (escapes included), each reason at most maxReason.
const (
	failureBudget = events.MaxReport / 2
	maxReason     = 512
)

// boundFailures keeps the failures that fit failureBudget, in order, and
// says how many more there were.
func boundFailures(failed []events.ResourceFailure) []events.ResourceFailure {
	var out []events.ResourceFailure
	used := 0
	for i, f := range failed {
		f = events.ResourceFailure{Path: bound(f.Path, maxReason), Reason: bound(f.Reason, maxReason)}
		b, _ := json.Marshal(f)
		if used+len(b) > failureBudget {
			return append(out, events.ResourceFailure{Path: "...", Reason: fmt.Sprintf("and %d more resource(s) failed", len(failed)-i)})
		}
		used += len(b)
		out = append(out, f)
	}
	return out
}

// bound cuts s to at most n bytes, on a rune boundary, marking the cut.
func bound(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - len("...")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}
