package rollout

import (
	"context"
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/meshctl/mesh/aggregates"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/events/store"
	"github.com/meshctl/mesh/manifest"
	"github.com/meshctl/mesh/projections"
	"github.com/meshctl/mesh/wire"
)

// A module's newest build reaches the nodes whose policy is auto by a
// rollout that starts by itself (rule 23). It is started once per build,
// whatever becomes of it: a build whose rollout halted or was aborted is
// not rolled out again until a newer one is registered, or an operator
// starts one.
//
// Its waves are those of the module's most recent rollout (the operator's
// canary plan, with its max-parallel, bake, deadline and auto-revert),
// chosen again among the auto nodes; with no rollout before it, one wave
// of every auto node.

// autoDue is a module whose auto nodes wait for its newest build.
type autoDue struct {
	module, build string
	last          *projections.Rollout // the module's most recent rollout
}

// startAutoRollouts starts the rollouts new builds ask for. Its id is the
// module and the build, the same in every controller, so of two
// controllers starting it one lands and the other conflicts.
func (h *Service) startAutoRollouts(ctx context.Context) error {
	due, version, err := h.autoRolloutsDue()
	if err != nil || due == nil {
		return err
	}
	blocked := false
	for _, d := range due {
		r := wire.RolloutRequest{Module: d.module, Build: d.build, Waves: []wire.WaveSpec{{Name: "all", Selector: "*"}}}
		if l := d.last; l != nil {
			r.Waves, r.AutoRevert, r.MaxParallel = nil, l.AutoRevert, l.MaxParallel
			r.Bake, r.Deadline = seconds(l.BakeSeconds), seconds(l.DeadlineSeconds)
			for _, w := range l.Waves {
				r.Waves = append(r.Waves, wire.WaveSpec{Name: w.Name, Selector: w.Selector})
			}
		}
		_, err := h.startRollout(ctx, "auto-"+d.module+"-"+manifest.ShortBuild(d.build), r, true)
		var refusal *aggregates.Error
		switch {
		case errors.Is(err, store.ErrConflict):
			// Another controller started it.
		case errors.As(err, &refusal) && refusal.Err == aggregates.ErrNameTaken:
			blocked = true // a rollout of the module is open: looked at again when it closes
		case errors.As(err, &refusal):
			h.Log.Warn("a new build's rollout cannot start", "module", d.module, "build", manifest.ShortBuild(d.build), "why", refusal.Detail)
		case err != nil:
			return err
		}
	}
	if !blocked {
		h.autoSeen.Store(version)
	}
	return nil
}

// autoRolloutsDue reads which modules' auto nodes wait for a build no
// rollout has taken yet; nil when nothing was registered or assigned since
// the last look found none (the composition version did not move).
func (h *Service) autoRolloutsDue() ([]autoDue, uint64, error) {
	var due []autoDue
	var version uint64
	err := h.Proj.Read(func(v *projections.View) error {
		version = v.CompositionVersion()
		seen := h.autoSeen.Load()
		if seen == version {
			return nil
		}
		rows, err := autoCandidates(v, seen, version)
		if err != nil {
			return err
		}
		latest := map[string]string{}
		var waiting []string
		for _, a := range rows {
			if a.Policy != events.PolicyAuto {
				continue
			}
			if _, read := latest[a.Module]; !read {
				m, _, err := v.Module(a.Module)
				if err != nil {
					return err
				}
				latest[a.Module] = m.Latest
			}
			if a.Build != latest[a.Module] && !slices.Contains(waiting, a.Module) {
				if n, found, err := v.Node(a.Node); err != nil || found && !n.Retired {
					waiting = append(waiting, a.Module)
				}
			}
		}
		rollouts, err := v.Rollouts()
		for _, module := range waiting {
			d := autoDue{module: module, build: latest[module]}
			taken := false
			for _, ro := range rollouts {
				if ro.Module != module {
					continue
				}
				taken = taken || ro.Build == d.build
				if d.last == nil || ro.Started.After(d.last.Started) {
					d.last = &ro
				}
			}
			if !taken {
				due = append(due, d)
			}
		}
		return err
	})
	if err == nil && due == nil {
		h.autoSeen.Store(version)
	}
	return due, version, err
}

// autoCandidates are the assignment rows that may have come to ask for a
// rollout since version seen, at which the look started all it could
// (none due, or each due one started, taken, or refused for good): only
// the moved nodes' when every event since moved one node alone
// (moved.Log), since such an event changes no module's newest build, no
// rollout and no other node's assignment; every row otherwise. A due
// module refused for a reason of its last rollout's (its waves, its
// max-parallel) is not looked at again until a move of its own nodes or
// a wider one; no one node's move elsewhere could lift such a refusal.
// A label changed on one node of 100,000 read every assignment (42 MB)
// on the drive's next tick, and that garbage put a collection into the
// status that followed (issue 34).
func autoCandidates(v *projections.View, seen, version uint64) ([]projections.AssignmentRow, error) {
	touched, ok := v.MovedBetween(seen, version)
	if seen == 0 || !ok {
		return v.Assignments()
	}
	var rows []projections.AssignmentRow
	for _, n := range slices.Sorted(maps.Keys(touched)) {
		of, err := v.AssignmentsOf(n)
		if err != nil {
			return nil, err
		}
		rows = append(rows, of...)
	}
	return rows, nil
}

func seconds(n int) time.Duration { return time.Duration(n) * time.Second }
