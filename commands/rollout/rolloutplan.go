package rollout

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/meshctl/mesh/aggregates"
	"github.com/meshctl/mesh/commands/push"
	"github.com/meshctl/mesh/compose"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/projections"
	"github.com/meshctl/mesh/wire"
)

// PlanRollout answers the plan of a rollout: it resolves the waves in
// order against the nodes the module is assigned to, composes each node
// as if its wave had taken the build, and diffs that against what the
// node was last sent. Nothing is sent or recorded.
func (h *Service) PlanRollout(ctx context.Context, r wire.RolloutPlanRequest) (wire.RolloutPlan, error) {
	out, pool, waves, err := h.chooseWaves(ctx, r)
	if err != nil {
		return out, err
	}
	var in compose.Input
	if err := h.Proj.Read(func(v *projections.View) (err error) { in, err = h.world.Input(v); return err }); err != nil {
		return out, err
	}
	return out, h.planWaves(ctx, &out, in, pool.rows, waves)
}

// chooseWaves resolves a rollout's build and waves: the plan without what
// would change on each node.
func (h *Service) chooseWaves(ctx context.Context, r wire.RolloutPlanRequest) (wire.RolloutPlan, wavePool, []events.RolloutWave, error) {
	out := wire.RolloutPlan{Module: r.Module, Waves: []wire.WavePlan{}, Left: []string{}, Held: []wire.HeldNode{}}
	var pool wavePool
	if len(r.Waves) == 0 {
		return out, pool, nil, aggregates.Refuse("plan a rollout of", r.Module, aggregates.ErrInvalid, "it has no wave; give --wave NAME=SELECTOR, once for each wave, in order")
	}
	if err := h.CatchUp(ctx); err != nil {
		return out, pool, nil, err
	}
	err := h.Proj.Read(func(v *projections.View) (err error) {
		if out.Build, _, err = h.world.BuildOf(v, "plan a rollout of", r.Module, r.Build); err != nil {
			return err
		}
		pool, out.Held, err = wavePoolOf(v, r.Module, r.Auto)
		return err
	})
	if err != nil {
		return out, pool, nil, err
	}
	waves, left, err := pool.resolve(r.Module, r.Waves, r.Auto)
	out.Left = left
	return out, pool, waves, err
}

// planWaves fills out's waves: each wave's nodes composed as if every wave
// had taken out.Build, and diffed against what each was last sent.
func (h *Service) planWaves(ctx context.Context, out *wire.RolloutPlan, in compose.Input, rows map[string]projections.Node, waves []events.RolloutWave) error {
	taken := map[string]bool{}
	for _, w := range waves {
		wp := wire.WavePlan{Name: w.Name, Selector: w.Selector, Nodes: []wire.PlannedNode{}, Unsent: []wire.UnsentNode{}}
		for _, n := range w.Nodes {
			wp.Nodes = append(wp.Nodes, wire.PlannedNode{Node: n})
			taken[n] = true
		}
		out.Waves = append(out.Waves, wp)
	}
	in.Assignments = slices.Clone(in.Assignments)
	for i, a := range in.Assignments {
		if a.Module == out.Module && taken[a.Node] {
			in.Assignments[i].Build = out.Build
		}
	}
	ref := compose.BuildRef{Module: out.Module, Build: out.Build}
	if _, ok := in.Manifests[ref]; !ok {
		err := h.Proj.Read(func(v *projections.View) error {
			m, found, err := h.world.Manifest(v, ref)
			if found {
				in.Manifests = maps.Clone(in.Manifests)
				in.Manifests[ref] = m
			}
			return err
		})
		if err != nil {
			return err
		}
	}
	w := compose.NewWorld(in)
	detailed := 0
	for i := range out.Waves {
		wp := &out.Waves[i]
		kept := wp.Nodes[:0]
		for _, p := range wp.Nodes {
			res := w.Compose(p.Node)
			if !res.Composable() {
				wp.Unsent = append(wp.Unsent, wire.UnsentNode{Node: p.Node, Reason: res.Reason()})
				continue
			}
			planned, err := h.push.Planned(ctx, rows[p.Node], res, &detailed)
			if err != nil {
				return err
			}
			kept = append(kept, planned)
		}
		wp.Nodes = kept
	}
	return nil
}

// wavePool is what waves choose among: the module's active nodes a
// rollout may move (in name order), their rows and their facts.
type wavePool struct {
	names []string
	rows  map[string]projections.Node
	facts map[string]projections.Facts
}

// wavePoolOf reads the nodes a rollout of module may move: every active one it
// is assigned to whose policy allows (not pinned; for the rollout a new
// build starts by itself, auto only). The others are held, with why.
func wavePoolOf(v *projections.View, module string, auto bool) (wavePool, []wire.HeldNode, error) {
	pool := wavePool{rows: map[string]projections.Node{}}
	held := []wire.HeldNode{}
	nodes, err := v.Nodes()
	if err != nil {
		return pool, held, err
	}
	for _, n := range nodes {
		if !n.Retired {
			pool.rows[n.Name] = n
		}
	}
	if pool.facts, err = v.AllFacts(); err != nil {
		return pool, held, err
	}
	names, err := v.AssignedTo(module)
	if err != nil {
		return pool, held, err
	}
	for _, name := range names {
		if _, active := pool.rows[name]; !active {
			continue
		}
		as, err := v.AssignmentsOf(name)
		if err != nil {
			return pool, held, err
		}
		for _, a := range as {
			switch p := a.Policy.Or(); {
			case a.Module != module:
			case p == events.PolicyPinned || auto && p != events.PolicyAuto:
				held = append(held, wire.HeldNode{Node: name, Policy: p})
			default:
				pool.names = append(pool.names, name)
			}
		}
	}
	return pool, held, nil
}

// resolve chooses each wave's nodes, in order, among the pool, each node
// in its first wave only; a wave that chooses none is refused. A wave's
// selector is a selector (see push.Selector), or N% for that share of the
// pool (rounded up) among the nodes no earlier wave chose, in name order.
// It answers the waves and the pool's nodes no wave chose. For the
// rollout a new build starts by itself (auto), a wave that chooses none is
// left out and a last wave * takes the nodes the others leave: no operator
// is there to be asked, and every auto node is to have the build.
func (p wavePool) resolve(module string, specs []wire.WaveSpec, auto bool) ([]events.RolloutWave, []string, error) {
	taken := map[string]bool{}
	var waves []events.RolloutWave
	for _, w := range specs {
		wave := events.RolloutWave{Name: w.Name, Selector: w.Selector, Nodes: []string{}}
		share, isShare, err := shareOf(w.Selector)
		if err != nil {
			return nil, nil, err
		}
		var sel push.Selector
		if !isShare {
			if sel, err = push.ParseSelector(w.Selector); err != nil {
				return nil, nil, err
			}
		}
		want := (len(p.names)*share + 99) / 100
		for _, n := range p.names {
			switch {
			case taken[n]:
			case isShare && len(wave.Nodes) < want, !isShare && sel.Matches(p.rows[n], p.facts[n]):
				wave.Nodes = append(wave.Nodes, n)
				taken[n] = true
			}
		}
		if len(wave.Nodes) == 0 && auto {
			continue
		}
		if len(wave.Nodes) == 0 {
			return nil, nil, aggregates.Refuse("roll out", module, aggregates.ErrInvalid, fmt.Sprintf("wave %s (%s) chooses no node of %s that an earlier wave did not, among those its policy lets a rollout move (a pinned one stays until assigned again)", w.Name, w.Selector, module))
		}
		waves = append(waves, wave)
	}
	left := []string{}
	for _, n := range p.names {
		if !taken[n] {
			left = append(left, n)
		}
	}
	if auto && len(left) > 0 {
		waves, left = append(waves, events.RolloutWave{Name: "rest", Selector: "*", Nodes: left}), []string{}
	}
	if len(waves) == 0 {
		return nil, nil, aggregates.Refuse("roll out", module, aggregates.ErrInvalid, "no node of it has a policy that lets a rollout move it (each is pinned, or the module is assigned to none)")
	}
	return waves, left, nil
}

// shareOf reads a wave selector of the form N% (1 to 100).
func shareOf(s string) (int, bool, error) {
	s = strings.TrimSpace(s)
	if !strings.HasSuffix(s, "%") {
		return 0, false, nil
	}
	n, err := strconv.Atoi(strings.TrimSuffix(s, "%"))
	if err != nil || n < 1 || n > 100 {
		return 0, false, aggregates.Refuse("select nodes by", fmt.Sprintf("%q", s), aggregates.ErrInvalid, "a share of a module's nodes is a whole percentage from 1% to 100%")
	}
	return n, true, nil
}
