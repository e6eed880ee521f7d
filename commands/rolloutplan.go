package commands

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/meshctl/mesh/aggregates"
	"github.com/meshctl/mesh/compose"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/manifest"
	"github.com/meshctl/mesh/projections"
)

// WaveSpec is one wave of a rollout as asked for: a name, and the selector
// of its nodes among those the module is assigned to ("*": every one not
// in an earlier wave).
type WaveSpec struct {
	Name     string `json:"name"`
	Selector string `json:"selector"`
}

// RolloutPlanRequest asks what a rollout of Module's Build (its latest
// when empty) in these waves would send, before anything is sent.
type RolloutPlanRequest struct {
	Module string     `json:"module"`
	Build  string     `json:"build,omitempty"`
	Waves  []WaveSpec `json:"waves"`
}

// RolloutPlan is every wave, its nodes, and what would change on each
// (issue 17's plan of the whole rollout, not only its first step).
type RolloutPlan struct {
	Module string     `json:"module"`
	Build  string     `json:"build"`
	Waves  []WavePlan `json:"waves"`
	// Left are the module's nodes no wave chose: a rollout leaves them on
	// the build they have.
	Left []string `json:"left"`
}

// WavePlan is one wave's nodes, each with what it would be sent.
type WavePlan struct {
	Name     string        `json:"name"`
	Selector string        `json:"selector"`
	Nodes    []PlannedNode `json:"nodes"`
	Unsent   []UnsentNode  `json:"unsent"`
}

// PlanRollout answers the plan of a rollout: it resolves the waves in
// order against the nodes the module is assigned to, composes each node
// as if its wave had taken the build, and diffs that against what the
// node was last sent. Nothing is sent or recorded.
func (h *Handlers) PlanRollout(ctx context.Context, r RolloutPlanRequest) (RolloutPlan, error) {
	refuse := func(format string, args ...any) error {
		return &aggregates.Error{Op: "plan a rollout of", ID: r.Module, Err: aggregates.ErrInvalid, Detail: fmt.Sprintf(format, args...)}
	}
	if len(r.Waves) == 0 {
		return RolloutPlan{}, refuse("it has no wave; give --wave NAME=SELECTOR, once for each wave, in order")
	}
	if err := h.catchUp(ctx); err != nil {
		return RolloutPlan{}, err
	}
	out := RolloutPlan{Module: r.Module, Waves: []WavePlan{}, Left: []string{}}
	var in compose.Input
	var rows map[string]projections.Node
	err := h.Proj.Read(func(v *projections.View) error {
		row, found, err := v.Module(r.Module)
		if err != nil {
			return err
		}
		if !found {
			return &aggregates.Error{Op: "plan a rollout of", ID: r.Module, Err: aggregates.ErrUnknownModule, Detail: "no module of that name is registered; see mesh module list"}
		}
		out.Build = row.Latest
		if r.Build != "" {
			out.Build = ""
			for _, b := range row.Builds {
				if b.Build == r.Build || manifest.ShortBuild(b.Build) == r.Build {
					out.Build = b.Build
				}
			}
			if out.Build == "" {
				return refuse("it has no build %s; mesh module show %s lists its builds", r.Build, r.Module)
			}
		}
		if in, err = h.input(v); err != nil {
			return err
		}
		nodes, err := v.Nodes()
		rows = map[string]projections.Node{}
		for _, n := range nodes {
			rows[n.Name] = n
		}
		return err
	})
	if err != nil {
		return out, err
	}
	waves, left, err := resolveWaves(in, rows, r.Module, r.Waves)
	if err != nil {
		return out, err
	}
	out.Left = left
	taken := map[string]bool{}
	for _, w := range waves {
		wp := WavePlan{Name: w.Name, Selector: w.Selector, Nodes: []PlannedNode{}, Unsent: []UnsentNode{}}
		for _, n := range w.Nodes {
			wp.Nodes = append(wp.Nodes, PlannedNode{Node: n})
			taken[n] = true
		}
		out.Waves = append(out.Waves, wp)
	}
	// Every wave's nodes on the new build, at once: what the rollout
	// leads to; each node is then diffed against what it holds now.
	for i, a := range in.Assignments {
		if a.Module == r.Module && taken[a.Node] {
			in.Assignments[i].Build = out.Build
		}
	}
	if _, ok := in.Manifests[compose.BuildRef{Module: r.Module, Build: out.Build}]; !ok {
		err := h.Proj.Read(func(v *projections.View) error {
			m, found, err := h.manifests.get(v, compose.BuildRef{Module: r.Module, Build: out.Build})
			if found {
				in.Manifests = maps.Clone(in.Manifests)
				in.Manifests[compose.BuildRef{Module: r.Module, Build: out.Build}] = m
			}
			return err
		})
		if err != nil {
			return out, err
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
				wp.Unsent = append(wp.Unsent, UnsentNode{Node: p.Node, Reason: res.Reason()})
				continue
			}
			planned, err := h.planned(ctx, rows[p.Node], res, &detailed)
			if err != nil {
				return out, err
			}
			kept = append(kept, planned)
		}
		wp.Nodes = kept
	}
	return out, nil
}

// resolveWaves chooses each wave's nodes, in order, among the active nodes
// the module is assigned to (in name order), each node in its first wave
// only; a wave that chooses none is refused. It answers the waves and the
// module's nodes no wave chose.
func resolveWaves(in compose.Input, rows map[string]projections.Node, module string, specs []WaveSpec) ([]events.RolloutWave, []string, error) {
	var pool []string
	for _, a := range in.Assignments {
		if a.Module == module {
			pool = append(pool, a.Node)
		}
	}
	slices.Sort(pool)
	taken := map[string]bool{}
	var waves []events.RolloutWave
	for _, w := range specs {
		sel, err := ParseSelector(w.Selector)
		if err != nil {
			return nil, nil, err
		}
		wave := events.RolloutWave{Name: w.Name, Selector: w.Selector, Nodes: []string{}}
		for _, n := range pool {
			if !taken[n] && sel.Matches(rows[n]) {
				wave.Nodes = append(wave.Nodes, n)
				taken[n] = true
			}
		}
		if len(wave.Nodes) == 0 {
			return nil, nil, &aggregates.Error{Op: "roll out", ID: module, Err: aggregates.ErrInvalid,
				Detail: fmt.Sprintf("wave %s (%s) chooses no node of %s that an earlier wave did not", w.Name, w.Selector, module)}
		}
		waves = append(waves, wave)
	}
	left := []string{}
	for _, n := range pool {
		if !taken[n] {
			left = append(left, n)
		}
	}
	return waves, left, nil
}
