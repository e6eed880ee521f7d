package push

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/meshctl/mesh/commands/world"
	"github.com/meshctl/mesh/compose"
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
	rows    map[string]projections.Node
	targets []string
	notes   map[string]string
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
	t := targets{rows: map[string]projections.Node{}, notes: map[string]string{}, now: h.Now()}
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
			return readEvery(v, &t, r.Behind, &drifts)
		}
		return readThese(v, &t, candidates, r.Behind, &drifts)
	})
	if err != nil {
		return t, err
	}
	var composed map[string]world.Would
	if r.Behind || r.Node != "" && round == 0 {
		// From the same view as the rows: the states are of one instant.
		composed = h.WouldOf(t.at, candidates)
	}
	heldSet := map[string]bool{}
	for _, n := range held {
		heldSet[n] = true
	}
	for _, name := range order(t.w, candidates, held) {
		row := t.rows[name]
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
			state, _, _ := composed[name].StateOf(row)
			state, _ = world.Drifted(state, "", row, drifts)
			if state == wire.StateCurrent {
				continue
			}
			if rep := row.LastReport; (state == wire.StateFailed || state == wire.StateRefused) && rep.FailingSince.Before(t.now.Add(-sameFailureFor)) {
				t.notes[name] = fmt.Sprintf("%s the same way since %s; the cause is unlikely to be timing", state, rep.FailingSince.UTC().Format(time.RFC3339))
			}
		}
		t.targets = append(t.targets, name)
	}
	return t, nil
}

// readEvery reads every node's row, brief (a push reads a row's version,
// its last send and report, never its labels and capabilities, which
// composition's input has, and a map of labels was most of decoding a
// row), and with behind every drift.
func readEvery(v *projections.View, t *targets, behind bool, drifts *map[string]projections.Drift) error {
	nodes, err := v.NodesBrief()
	if err != nil {
		return err
	}
	for _, n := range nodes {
		t.rows[n.Name] = n
	}
	if behind {
		*drifts, err = v.Drifts()
	}
	return err
}

// readThese reads the rows (and with behind the drifts) of names alone.
func readThese(v *projections.View, t *targets, names map[string]bool, behind bool, drifts *map[string]projections.Drift) error {
	*drifts = map[string]projections.Drift{}
	for name := range names {
		n, found, err := v.Node(name)
		if err != nil {
			return err
		}
		if found {
			t.rows[name] = n
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
