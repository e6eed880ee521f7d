package push

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/meshctl/mesh/commands/world"
	"github.com/meshctl/mesh/compose"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/projections"
	"github.com/meshctl/mesh/verdict"
	"github.com/meshctl/mesh/wire"
)

// targets is what one round of a push sends to: chosen from one view of the
// read models, with the indexed world their declarations are composed from.
type targets struct {
	w *compose.World
	// at is the world with the version it was indexed at: a push over
	// every node keeps what it composed as at's (world.Keep).
	at      world.At
	targets []string
	// rows are what the push keeps of each target's row, in targets'
	// order: a node's whole row, kept for the push's length, was 93 MB
	// of a 100,000-node push's live heap (issue 34).
	rows  []sendRow
	notes map[string]string
	// held are the nodes left out because a hand declaration holds them.
	held []wire.UnsentNode
	now  time.Time
}

// SelectTargets chooses the nodes this round sends to: those in only, or
// when only is nil, every active node (that is behind, with r.Behind); a
// named push adds the nodes its consequences changed.
// within, when not nil (a push --selector), bounds every round.
//
// A push that names its nodes (by name, by list or selector, or a later
// round's few that moved) reads those nodes' rows alone, and composes only
// them when the composition cache does not hold the mesh's version: at
// 100,000 nodes a push of one node read every row (issue 34). The nodes a
// hand declaration holds, which every push names, come from their index.
func (h *Service) SelectTargets(only, within map[string]bool, r wire.PushRequest, round int) (targets, error) {
	t := targets{notes: map[string]string{}, now: h.Now()}
	var rows nodeRows
	var drifts map[string]projections.Drift
	var held []string
	var linked, candidates map[string]bool // candidates nil: every node
	err := h.Proj.Read(func(v *projections.View) (err error) {
		if t.at, err = h.At(v); err != nil {
			return err
		}
		t.w = t.at.World
		if held, err = v.HandHeld(); err != nil {
			return err
		}
		if r.Node != "" && round == 0 {
			linked = t.w.Linked(r.Node)
		}
		switch {
		case only != nil:
			candidates = maps.Clone(only)
			maps.Copy(candidates, linked)
		case within != nil:
			candidates = within
		default:
			return readEvery(v, &rows, r.Behind, &drifts)
		}
		return readThese(v, &rows, candidates, r.Behind, &drifts)
	})
	if err != nil {
		return t, err
	}
	var composed *world.Composed
	if r.Behind || r.Node != "" && round == 0 {
		// From the same view as the rows: the states are of one instant.
		composed = h.WouldOf(t.at, candidates)
	}
	heldSet := map[string]bool{}
	for _, n := range held {
		heldSet[n] = true
	}
	names := order(t.w, candidates, held)
	if !r.Behind {
		// Nearly every name is a target: grown by appending, the rows
		// (some 170 bytes each) were copied and the new arrays' pages
		// faulted in again at each doubling, 2% of the controller's CPU
		// in a push to 10,000 nodes. A push --behind sends to the few
		// behind, and is left to grow rather than hold a row's room for
		// every node.
		t.targets, t.rows = make([]string, 0, len(names)), make([]sendRow, 0, len(names))
	}
	for _, name := range names {
		row := rows.of(name)
		if within != nil && !within[name] {
			continue
		}
		if !only[name] && heldSet[name] {
			// Only a push that names it sends over a hand's declaration.
			t.held = append(t.held, wire.UnsentNode{Node: name, Reason: verdict.HandHeldWhy})
			continue
		}
		if candidates != nil && !candidates[name] {
			continue
		}
		switch {
		case only != nil && only[name]:
		case only != nil && round == 0 && r.Node != "" && linked[name] && consequence(name, row, composed):
			// A named push leaves the mesh consistent: what the named node
			// provides or receives changed this node's declaration too.
			t.notes[name] = "as a consequence of " + r.Node
		case only != nil:
			continue
		case r.Behind:
			state, _, _ := composed.Of(name).StateOf(row)
			state, _ = world.Drifted(state, "", row, drifts)
			if state == wire.StateCurrent {
				continue
			}
			if rep := row.LastReport; (state == wire.StateFailed || state == wire.StateRefused) && rep.FailingSince.Before(t.now.Add(-sameFailureFor)) {
				t.notes[name] = fmt.Sprintf("%s the same way since %s; the cause is unlikely to be timing", state, rep.FailingSince.UTC().Format(time.RFC3339))
			}
		}
		t.targets = append(t.targets, name)
		t.rows = append(t.rows, sendRowOf(row))
	}
	return t, nil
}

// nodeRows are the rows a round reads: every node's, by name (from a scan,
// in key order), or a few by name.
type nodeRows struct {
	sorted []projections.Node
	byName map[string]projections.Node
}

// of is name's row (zero when it has none).
func (r nodeRows) of(name string) projections.Node {
	if r.byName != nil {
		return r.byName[name]
	}
	i, found := slices.BinarySearchFunc(r.sorted, name, func(n projections.Node, name string) int { return strings.Compare(n.Name, name) })
	if !found {
		return projections.Node{}
	}
	return r.sorted[i]
}

// sendRow is what a push keeps of a target's row: its version (what the
// append expects), its last send (what the next is numbered after and
// chained to, and a plan reads back) and the highest sequence a refusal
// said it applied.
type sendRow struct {
	name    string
	version uint64
	sent    bool
	last    wire.Sent // only Sequence, Digest, ContentDigest and StreamSeq
	refused uint64
}

func sendRowOf(n projections.Node) sendRow {
	r := sendRow{name: n.Name, version: n.Version}
	if s := n.LastSent; s != nil {
		r.sent, r.last = true, wire.Sent{Sequence: s.Sequence, Digest: s.Digest, ContentDigest: s.ContentDigest, StreamSeq: s.StreamSeq}
	}
	if rep := n.LastReport; rep != nil && rep.Outcome == events.OutcomeRefused {
		r.refused = rep.Highest
	}
	return r
}

// node is the row as much as sendRow keeps of it.
func (r sendRow) node() projections.Node {
	n := projections.Node{Name: r.name, Version: r.version}
	if r.sent {
		last := r.last
		n.LastSent = &last
	}
	if r.refused > 0 {
		n.LastReport = &wire.Report{Outcome: events.OutcomeRefused, Highest: r.refused}
	}
	return n
}

// readEvery reads every node's row, brief (a push reads a row's version,
// its last send and report, never its labels and capabilities, which
// composition's input has, and a map of labels was most of decoding a
// row), and with behind every drift.
func readEvery(v *projections.View, rows *nodeRows, behind bool, drifts *map[string]projections.Drift) error {
	var err error
	if rows.sorted, err = v.NodesBrief(); err != nil {
		return err
	}
	if behind {
		*drifts, err = v.Drifts()
	}
	return err
}

// readThese reads the rows (and with behind the drifts) of names alone.
func readThese(v *projections.View, rows *nodeRows, names map[string]bool, behind bool, drifts *map[string]projections.Drift) error {
	*drifts = map[string]projections.Drift{}
	rows.byName = map[string]projections.Node{}
	for name := range names {
		n, found, err := v.Node(name)
		if err != nil {
			return err
		}
		if found {
			rows.byName[name] = n
		}
		if !behind {
			continue
		}
		d, found, err := v.Drift(name)
		if err != nil {
			return err
		}
		if found {
			(*drifts)[name] = d
		}
	}
	return nil
}

// order is the nodes a round looks at, by name, as the world lists them:
// every node it can compose, or (candidates not nil) those of candidates
// and of held it can compose.
func order(w *compose.World, candidates map[string]bool, held []string) []string {
	if candidates == nil {
		return w.Nodes()
	}
	names := slices.Concat(slices.Collect(maps.Keys(candidates)), held)
	slices.Sort(names)
	names = slices.Compact(names)
	return slices.DeleteFunc(names, func(n string) bool { return !w.Has(n) })
}
