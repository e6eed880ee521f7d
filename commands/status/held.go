package status

import (
	"fmt"
	"slices"
	"sync"

	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/manifest"
	"github.com/meshctl/mesh/projections"
	"github.com/meshctl/mesh/wire"
)

// held turns a current node into held when some module it holds has a
// newer build waiting (why is holdsOf's sentence for it).
func held(state wire.State, detail, why string) (wire.State, string) {
	if state != wire.StateCurrent || why == "" {
		return state, detail
	}
	return wire.StateHeld, why
}

// heldCache keeps holdsOf's answer for the whole mesh between the events
// that can change it: assignments and registrations (the composition
// version) and rollout steps (their versions). Reading every assignment at
// each status tripled a 10,000-node status's time.
type heldCache struct {
	mu               sync.Mutex
	valid            bool
	version, rollout uint64
	holds            map[string]string
}

// holdsAll is holdsOf for every node, from the cache when nothing it reads
// has moved.
func (h *Service) holdsAll(v *projections.View) (map[string]string, error) {
	rollouts, err := v.Rollouts()
	if err != nil {
		return nil, err
	}
	var rv uint64
	for _, ro := range rollouts {
		rv = max(rv, ro.Version)
	}
	cv := v.CompositionVersion()
	c := &h.held
	c.mu.Lock()
	if c.valid && c.version == cv && c.rollout == rv {
		defer c.mu.Unlock()
		return c.holds, nil
	}
	c.mu.Unlock()
	// Composition has just read every assignment at this version (the
	// status composes before it judges): only the few on an older build
	// than their module's newest are read again, for their policy.
	// Retired nodes' are not among them: status skips those.
	newest := newestOf(v)
	var behind []projections.AssignmentRow
	fast, err := h.world.EachAssignedAt(cv, func(node, module, build string) error {
		row, older, err := behindRow(v, newest, node, module, build)
		if older {
			behind = append(behind, row)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	var holds map[string]string
	if fast {
		holds, err = holdsAmong(v, behind, newest)
	} else {
		holds, err = holdsOf(v, "")
	}
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.valid, c.version, c.rollout, c.holds = true, cv, rv, holds
	c.mu.Unlock()
	return holds, nil
}

// holdsOf reads why each node (or only the one named) holds a build older
// than its module's newest: by node, one sentence per such module, joined.
func holdsOf(v *projections.View, node string) (map[string]string, error) {
	rows, err := v.Assignments()
	if node != "" {
		rows, err = v.AssignmentsOf(node)
	}
	if err != nil {
		return nil, err
	}
	return holdsAmong(v, rows, newestOf(v))
}

// behindRow reads module's assignment to node whole when its build is
// older than the module's newest (older), for its policy: only such a
// row holds its node, so holdsAmong over these says what it says over
// every row.
func behindRow(v *projections.View, newest func(string) (string, error), node, module, build string) (projections.AssignmentRow, bool, error) {
	b, err := newest(module)
	if err != nil || build == b || b == "" {
		return projections.AssignmentRow{}, false, err
	}
	of, err := v.AssignmentsOf(node)
	if err != nil {
		return projections.AssignmentRow{}, false, err
	}
	i := slices.IndexFunc(of, func(r projections.AssignmentRow) bool { return r.Module == module })
	if i < 0 {
		return projections.AssignmentRow{}, false, fmt.Errorf("status: the assignment of %s to %s composition read is not in the read models", module, node)
	}
	return of[i], true, nil
}

// newestOf answers each module's newest build, reading its row once.
func newestOf(v *projections.View) func(module string) (string, error) {
	latest := map[string]string{}
	return func(module string) (string, error) {
		if b, read := latest[module]; read {
			return b, nil
		}
		m, _, err := v.Module(module)
		latest[module] = m.Latest
		return m.Latest, err
	}
}

// holdsAmong is holdsOf over the assignment rows given.
func holdsAmong(v *projections.View, rows []projections.AssignmentRow, newest func(string) (string, error)) (map[string]string, error) {
	rollouts, err := v.Rollouts()
	if err != nil {
		return nil, err
	}
	waits, err := waitsIn(rollouts, newest)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, a := range rows {
		b, err := newest(a.Module)
		if err != nil {
			return nil, err
		}
		if a.Build == b || b == "" {
			continue
		}
		why, ok := waits[[2]string{a.Module, a.Node}]
		if !ok {
			why = policyHold(a, b)
		}
		if have := out[a.Node]; have != "" {
			why = have + "; " + why
		}
		out[a.Node] = why
	}
	return out, nil
}

// waitsIn says, by module and node, why a node waits for a rollout of its
// module's newest build: the newest such rollout whose waves hold it and
// have not taken it yet. One pass over the waves: looking each held node
// up in every wave made a 10,000-node rollout's status quadratic.
func waitsIn(rollouts []projections.Rollout, newest func(string) (string, error)) (map[[2]string]string, error) {
	out := map[[2]string]string{}
	for _, ro := range slices.Backward(rollouts) {
		b, err := newest(ro.Module)
		if err != nil {
			return nil, err
		}
		if ro.Build != b {
			continue
		}
		build := fmt.Sprintf("%s build %s", ro.Module, manifest.ShortBuild(b))
		for i, w := range ro.Waves {
			wave := fmt.Sprintf("wave %d (%s) of rollout %s", i+1, w.Name, ro.ID)
			var why string
			switch {
			case ro.State == projections.RolloutHalted:
				why = fmt.Sprintf("%s is held: rollout %s halted (mesh rollout show %s)", build, ro.ID, ro.ID)
			case ro.State == projections.RolloutPaused:
				why = fmt.Sprintf("%s waits for %s, which is paused", build, wave)
			case ro.Open() && i > ro.Wave:
				why = fmt.Sprintf("%s waits for %s", build, wave)
			case ro.Open() && i == ro.Wave:
				why = fmt.Sprintf("%s waits its turn in %s (max-parallel %s)", build, wave, ro.MaxParallel)
			default:
				continue
			}
			for _, n := range w.Nodes {
				if _, said := out[[2]string{ro.Module, n}]; !said {
					out[[2]string{ro.Module, n}] = why
				}
			}
		}
	}
	return out, nil
}

// policyHold says why assignment a is not on build newest of its module
// when no rollout holds it: its policy.
func policyHold(a projections.AssignmentRow, newest string) string {
	build := fmt.Sprintf("%s build %s", a.Module, manifest.ShortBuild(newest))
	switch a.Policy.Or() {
	case events.PolicyPinned:
		return fmt.Sprintf("%s is registered; %s is pinned to %s (mesh assign %s %s takes the new one)", build, a.Module, manifest.ShortBuild(a.Build), a.Node, a.Module)
	case events.PolicyAuto:
		return fmt.Sprintf("%s waits for its rollout (policy auto)", build)
	}
	return fmt.Sprintf("%s waits for a rollout (policy manual: mesh rollout start %s --wave ...)", build, a.Module)
}
