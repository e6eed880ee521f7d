package history

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/meshctl/mesh/aggregates"
	"github.com/meshctl/mesh/commands/core"
	"github.com/meshctl/mesh/compose"
	"github.com/meshctl/mesh/declaration"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/fanout"
	"github.com/meshctl/mesh/projections"
	"github.com/meshctl/mesh/wire"
)

// recorded is one indexed declaration read back by its sequence.
type recorded struct {
	seq  uint64
	at   time.Time
	sent events.DeclarationSent
	decl *declaration.Declaration // nil when its bytes do not decode
}

// index reads node's history rows.
func (h *Service) index(node string, since, until time.Time) (idx []projections.HistoryEntry, err error) {
	err = h.Proj.Read(func(v *projections.View) error {
		idx, err = v.History(node, since, until)
		return err
	})
	if pending := (*projections.HistoryPending)(nil); errors.As(err, &pending) {
		err = aggregates.Refuse("show the history of", node, aggregates.ErrNotYet, pending.Error())
	}
	return idx, err
}

// readDeclarations reads the declarations of rows back from the log by
// sequence, each checked against its row: a row the log does not bear out
// is a read model gone wrong, and answering from it would be a lie.
func (h *Service) readDeclarations(ctx context.Context, rows []projections.HistoryEntry) ([]recorded, error) {
	// Each read is a round trip; they are independent, so several are in
	// flight at once, and the results keep the rows' order.
	out := make([]recorded, len(rows))
	errs := make([]error, len(rows))
	fanout.Each(len(rows), 32, func(i int) {
		out[i], errs[i] = h.readDeclaration(ctx, rows[i])
	})
	return out, errors.Join(errs...)
}

func (h *Service) readDeclaration(ctx context.Context, row projections.HistoryEntry) (recorded, error) {
	m, err := h.Store.Get(ctx, row.Seq)
	if err != nil {
		return recorded{}, err
	}
	env, ev, err := events.Decode(m.Data)
	if err != nil {
		return recorded{}, fmt.Errorf("event %d: %w", row.Seq, err)
	}
	sent, ok := ev.(events.DeclarationSent)
	if !ok || sent.Digest != row.Digest {
		return recorded{}, fmt.Errorf("the history index says event %d is declaration %s, but the log holds a %s there; run mesh projections verify",
			row.Seq, row.Digest, ev.EventType())
	}
	r := recorded{seq: row.Seq, at: env.OccurredAt, sent: sent}
	var d declaration.Declaration
	if err := json.Unmarshal(sent.Declaration, &d); err == nil {
		r.decl = &d
	}
	return r, nil
}

// historyKinds names the kinds of the history index's rows.
var historyKinds = map[byte]string{
	projections.HistoryDeclaration: "declaration", projections.HistoryApplied: "applied",
	projections.HistoryFailed: "failed", projections.HistoryRefused: "refused", projections.HistoryDrift: "drift",
	projections.HistoryInterrupted: "interrupted",
	projections.HistoryUnreachable: "unreachable", projections.HistoryReachable: "reachable",
}

// History answers every declaration the node was told and every report it
// sent back, from the history index; with Diff, it reads the declarations
// whose content changed back from the log for their contents.
func (h *Service) History(ctx context.Context, r wire.HistoryRequest) (wire.History, error) {
	if err := core.ValidName("show the history of", r.Node); err != nil {
		return wire.History{}, err
	}
	if !r.Since.IsZero() && !r.Until.IsZero() && r.Since.After(r.Until) {
		return wire.History{}, aggregates.Refuse("show the history of", r.Node, aggregates.ErrInvalid, fmt.Sprintf("--since %s is after --until %s: nothing lies between them; swap them",
			r.Since.UTC().Format(time.RFC3339), r.Until.UTC().Format(time.RFC3339)))
	}
	if _, found, err := h.Proj.Node(r.Node); err != nil || !found {
		if err == nil {
			err = aggregates.Refuse("show the history of", r.Node, aggregates.ErrUnknownNode, "no node of that name is enrolled; see mesh node list")
		}
		return wire.History{}, err
	}
	idx, err := h.index(r.Node, r.Since, r.Until)
	if err != nil {
		return wire.History{}, err
	}
	out := wire.History{Node: r.Node, Entries: make([]wire.HistoryEntry, 0, len(idx))}
	for _, row := range idx {
		out.Entries = append(out.Entries, wire.HistoryEntry{Seq: row.Seq, At: row.At, Kind: historyKinds[row.Kind],
			Sequence: row.Sequence, Digest: row.Digest, By: row.By, Operator: row.Operator, Builds: row.Builds, BuildsUnknown: row.Kind == projections.HistoryDeclaration && row.Builds == nil,
			Resources: row.Resources, Changed: row.Changed, Reason: row.Reason, Highest: row.Highest, Failed: row.Failed,
			Paths: row.Paths, Corrected: row.Corrected, BeganAt: row.BeganAt, LastHeard: row.LastHeard, Bound: row.Bound.Seconds()})
	}
	if r.Diff {
		if err := h.diff(ctx, idx, out.Entries); err != nil {
			return wire.History{}, err
		}
	}
	return out, nil
}

// diff fills each declaration's changes against the one before it. Equal
// content digests are equal content, so only a declaration whose content
// differs from the one before, and that one, are read back from the log:
// a history of a thousand pushes of one content is one read.
func (h *Service) diff(ctx context.Context, idx []projections.HistoryEntry, entries []wire.HistoryEntry) error {
	var sent []int // the declarations, by index into idx
	for i, row := range idx {
		if row.Kind == projections.HistoryDeclaration {
			sent = append(sent, i)
		}
	}
	// changed[k]: the k-th declaration differs from the one before it (the
	// first differs from nothing). It and the one before are read.
	changed := make([]bool, len(sent))
	need := make([]bool, len(sent))
	var rows []projections.HistoryEntry
	for k, i := range sent {
		changed[k] = k == 0 || idx[i].ContentDigest == "" || idx[sent[k-1]].ContentDigest != idx[i].ContentDigest
		if changed[k] && k > 0 && !need[k-1] {
			need[k-1], rows = true, append(rows, idx[sent[k-1]])
		}
		if changed[k] {
			need[k], rows = true, append(rows, idx[i])
		}
	}
	recs, err := h.readDeclarations(ctx, rows)
	if err != nil {
		return err
	}
	content := make([]*compose.Declaration, len(sent)) // nil where not read
	next := 0
	for k := range sent {
		if !need[k] {
			continue
		}
		rec := recs[next]
		next++
		if rec.decl == nil {
			return fmt.Errorf("event %d: the declaration's bytes do not decode, so what changed cannot be shown; mesh audit %s names the break", rec.seq, rec.sent.Node)
		}
		c := rec.decl.Content()
		content[k] = &c
	}
	for k, i := range sent {
		entries[i].Changes = []compose.Change{} // what Diff answers for equal content
		if changed[k] {
			var previous *compose.Declaration
			if k > 0 {
				previous = content[k-1]
			}
			entries[i].Changes = compose.Diff(previous, content[k])
		}
	}
	return nil
}
