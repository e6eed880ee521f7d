package commands

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/meshctl/mesh/aggregates"
	"github.com/meshctl/mesh/compose"
	"github.com/meshctl/mesh/declaration"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/projections"
)

// HistoryRequest asks for what a node was told and what it said, in order.
type HistoryRequest struct {
	Node  string    `json:"node"`
	Since time.Time `json:"since,omitzero"`
	Until time.Time `json:"until,omitzero"`
	Diff  bool      `json:"diff,omitempty"`
}

// History is a node's declarations and reports, in stream order.
type History struct {
	Node    string         `json:"node"`
	Entries []HistoryEntry `json:"entries"`
}

// HistoryEntry is one declaration sent or one report received.
type HistoryEntry struct {
	Seq       uint64                   `json:"seq"` // stream sequence
	At        time.Time                `json:"at"`
	Kind      string                   `json:"kind"` // "declaration", "applied", "failed", "refused"
	Sequence  uint64                   `json:"sequence"`
	Digest    string                   `json:"digest"`
	By        string                   `json:"by,omitempty"`
	Builds    []compose.ModuleBuild    `json:"builds,omitempty"`
	Resources int                      `json:"resources,omitempty"`
	Reason    string                   `json:"reason,omitempty"`
	Failed    []events.ResourceFailure `json:"failed,omitempty"`
	Changes   []compose.Change         `json:"changes,omitempty"` // with diff: against the declaration before
}

// recorded is one indexed event read back by its sequence.
type recorded struct {
	seq  uint64
	at   time.Time
	ev   events.Event
	decl *declaration.Declaration
}

// nodeEvents reads node's indexed declarations and reports by sequence.
func (h *Handlers) nodeEvents(ctx context.Context, node string, since, until time.Time) ([]recorded, error) {
	var idx []projections.HistoryEntry
	err := h.Proj.Read(func(v *projections.View) (err error) {
		idx, err = v.History(node, since, until)
		return err
	})
	if err != nil {
		return nil, err
	}
	// Each read is a round trip; they are independent, so several are in
	// flight at once (a history of a thousand declarations is a thousand
	// direct gets), and the results keep the index's order.
	out := make([]recorded, len(idx))
	errs := make([]error, len(idx))
	inFlight(len(idx), 32, func(i int) {
		out[i], errs[i] = h.readEvent(ctx, idx[i].Seq)
	})
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (h *Handlers) readEvent(ctx context.Context, seq uint64) (recorded, error) {
	m, err := h.Store.Get(ctx, seq)
	if err != nil {
		return recorded{}, err
	}
	env, ev, err := events.Decode(m.Data)
	if err != nil {
		return recorded{}, fmt.Errorf("event %d: %w", seq, err)
	}
	r := recorded{seq: seq, at: env.OccurredAt, ev: ev}
	if sent, ok := ev.(events.DeclarationSent); ok {
		var d declaration.Declaration
		if err := json.Unmarshal(sent.Declaration, &d); err == nil {
			r.decl = &d
		}
	}
	return r, nil
}

// inFlight runs fn(0..n-1) on up to k goroutines: for round trips, where
// waiting, not the CPU, is the cost.
func inFlight(n, k int, fn func(int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(n, k) {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				fn(i)
			}
		})
	}
	wg.Wait()
}

// History answers every declaration the node was told and every report it
// sent back, from the history index and reads by sequence.
func (h *Handlers) History(ctx context.Context, r HistoryRequest) (History, error) {
	if err := validName("show the history of", r.Node); err != nil {
		return History{}, err
	}
	if _, found, err := h.Proj.Node(r.Node); err != nil || !found {
		if err == nil {
			err = &aggregates.Error{Op: "show the history of", ID: r.Node, Err: aggregates.ErrUnknownNode, Detail: "no node of that name is enrolled; see mesh node list"}
		}
		return History{}, err
	}
	recs, err := h.nodeEvents(ctx, r.Node, r.Since, r.Until)
	if err != nil {
		return History{}, err
	}
	out := History{Node: r.Node, Entries: []HistoryEntry{}}
	var previous *compose.Declaration
	for _, rec := range recs {
		e := HistoryEntry{Seq: rec.seq, At: rec.at}
		switch ev := rec.ev.(type) {
		case events.DeclarationSent:
			e.Kind, e.Sequence, e.Digest, e.By, e.Resources = "declaration", ev.Sequence, ev.Digest, ev.By, ev.Resources
			if rec.decl != nil {
				e.Builds = rec.decl.Modules
				c := rec.decl.Content()
				if r.Diff {
					e.Changes = compose.Diff(previous, &c)
				}
				previous = &c
			}
		case events.DeclarationApplied:
			e.Kind, e.Sequence, e.Digest = "applied", ev.Sequence, ev.Digest
		case events.DeclarationFailed:
			e.Kind, e.Sequence, e.Digest, e.Failed = "failed", ev.Sequence, ev.Digest, ev.Failed
		case events.DeclarationRefused:
			e.Kind, e.Sequence, e.Digest, e.Reason = "refused", ev.Sequence, ev.Digest, ev.Reason
		}
		out.Entries = append(out.Entries, e)
	}
	return out, nil
}
