package reconcile

import (
	"maps"
	"slices"

	"github.com/meshctl/mesh/compose"
	"github.com/meshctl/mesh/manifest"
	"github.com/meshctl/mesh/projections"
	"github.com/meshctl/mesh/wire"
)

// look judges the nodes that what the read models folded since the last
// look may have made due. Nothing folded: nothing read. A composition or
// a rollout moved (or the backstop is due): every node. Otherwise only
// the nodes a new drift report or liveness change names, and those
// queued, which a person's push may have sent meanwhile.
func (h *Service) look() error {
	now := h.Now()
	h.mu.Lock()
	seen, full := h.seen, h.swept.IsZero() || now.Sub(h.swept) >= h.cfg.Backstop
	h.mu.Unlock()
	if h.Proj.Checkpoint() == seen.checkpoint && !full {
		return nil
	}
	// The marks first, then the composition: the composition is then of
	// the marks' version or a newer one, so a change is never marked seen
	// while judged against what was composed before it.
	var m marks
	var drifts map[string]projections.Drift
	var live projections.Lives
	var rollouts []projections.Rollout
	err := h.Proj.Read(func(v *projections.View) (err error) {
		m.checkpoint, m.composition = v.Checkpoint(), v.CompositionVersion()
		if drifts, err = v.Drifts(); err != nil {
			return err
		}
		if live, err = v.Liveness(); err != nil {
			return err
		}
		rollouts, err = v.Rollouts()
		return err
	})
	if err != nil {
		return err
	}
	for _, ro := range rollouts {
		m.rollouts = max(m.rollouts, ro.Version)
	}
	var named []string
	for n, d := range drifts {
		m.drift = max(m.drift, d.Seq)
		if d.Seq > seen.drift {
			named = append(named, n)
		}
	}
	for _, l := range live {
		m.liveness = max(m.liveness, l.Version)
		if l.Version > seen.liveness && !l.Unreachable {
			named = append(named, l.Node)
		}
	}
	full = full || m.composition != seen.composition || m.rollouts != seen.rollouts
	would, err := h.world.ComposeAll()
	if err != nil {
		return err
	}
	in := inRollouts(rollouts)
	judged := map[string]verdictOf{}
	reasons := map[string]string{}
	reported := map[string]bool{}
	err = h.Proj.Read(func(v *projections.View) error {
		h.mu.Lock()
		if !full {
			named = append(named, h.queue...)
			named = slices.AppendSeq(named, maps.Keys(h.awaiting))
		}
		h.mu.Unlock()
		rows, err := h.rowsOf(v, full, named)
		if err != nil {
			return err
		}
		for _, row := range rows {
			n := node{row: row, would: would.Of(row.Name), rollout: in[row.Name], unreachable: live.Of(row.Name).Unreachable}
			if n.mode, n.modeOf, err = h.modeOf(v, row.Name); err != nil {
				return err
			}
			n.drifted = driftedNode(row, n.would, drifts)
			judged[row.Name], reasons[row.Name] = judge(n)
			reported[row.Name] = row.Retired || row.LastReport != nil && row.LastSent != nil && row.LastReport.Digest == row.LastSent.Digest
		}
		return nil
	})
	if err != nil {
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.seen = m
	if full {
		h.swept, h.left = now, map[string]string{}
	}
	h.queue = requeue(h.queue, judged)
	for name, at := range h.awaiting {
		if reported[name] || now.Sub(at) >= h.cfg.Backstop {
			delete(h.awaiting, name)
		}
	}
	for name, j := range judged {
		delete(h.left, name)
		if j == leave {
			h.left[name] = reasons[name]
		}
	}
	return nil
}

// requeue keeps the queued nodes still due, in their order, then adds the
// newly due by name: a node waits its turn once, however often it is
// named.
func requeue(queue []string, judged map[string]verdictOf) []string {
	out := make([]string, 0, len(queue))
	in := map[string]bool{}
	for _, n := range queue {
		if j, ok := judged[n]; (!ok || j == send) && !in[n] {
			out, in[n] = append(out, n), true
		}
	}
	var added []string
	for n, j := range judged {
		if j == send && !in[n] {
			added = append(added, n)
		}
	}
	slices.Sort(added)
	return append(out, added...)
}

// rowsOf reads every node's row (all), or the rows of the nodes named.
func (h *Service) rowsOf(v *projections.View, all bool, named []string) ([]projections.Node, error) {
	if all {
		return v.Nodes()
	}
	slices.Sort(named)
	var rows []projections.Node
	for _, name := range slices.Compact(named) {
		row, found, err := v.Node(name)
		if err != nil {
			return nil, err
		}
		if found {
			rows = append(rows, row)
		}
	}
	return rows, nil
}

// modeOf is the weakest reconcile mode among the builds assigned to the
// node (the manifests it is composed from), and the module that says it;
// behind for a node with no module.
func (h *Service) modeOf(v *projections.View, node string) (mode, module string, err error) {
	rows, err := v.AssignmentsOf(node)
	if err != nil {
		return "", "", err
	}
	mode = manifest.ReconcileAlways
	if len(rows) == 0 {
		mode = manifest.ReconcileBehind
	}
	for _, a := range rows {
		m, found, err := h.world.Manifest(v, compose.BuildRef{Module: a.Module, Build: a.Build})
		if err != nil {
			return "", "", err
		}
		if !found {
			continue // the node cannot be composed: judge says nothing
		}
		if r := m.ReconcileMode(); module == "" || weaker(r, mode) {
			mode, module = r, a.Module
		}
	}
	return mode, module, nil
}

// inRollouts names, by node, the rollout neither finished nor aborted
// whose waves hold it: a halted rollout's nodes too, or the reconciler
// would send on the build the rollout halted on.
func inRollouts(rollouts []projections.Rollout) map[string]string {
	out := map[string]string{}
	for _, ro := range rollouts {
		if ro.State == wire.RolloutFinished || ro.State == wire.RolloutAborted {
			continue
		}
		for _, w := range ro.Waves {
			for _, n := range w.Nodes {
				out[n] = ro.ID
			}
		}
	}
	return out
}
