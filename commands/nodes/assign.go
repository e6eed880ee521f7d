package nodes

import (
	"cmp"
	"context"
	"errors"

	"github.com/meshctl/mesh/aggregates"
	"github.com/meshctl/mesh/commands/core"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/events/store"
	"github.com/meshctl/mesh/manifest"
	"github.com/meshctl/mesh/projections"
	"github.com/meshctl/mesh/secret"
	"github.com/meshctl/mesh/wire"
)

// Assign gives a node a build of a module (the latest unless one is
// named) under an upgrade policy. The catalogue is read from the
// projections; the node aggregate decides. Assigning again after the module
// was re-registered is how an upgrade reaches a node outside a rollout.
func (h *Service) Assign(ctx context.Context, r wire.AssignRequest) (wire.Assigned, error) {
	if err := core.ValidName("assign to", r.Node); err != nil {
		return wire.Assigned{}, err
	}
	cmd, m, err := h.assignCommand(r.Module, r.Build, r.Policy, r.Settings)
	if err != nil {
		return wire.Assigned{}, err
	}
	cmd.Node, cmd.Unset, cmd.Reset = r.Node, r.Unset, r.Reset
	var had, now aggregates.Assignment
	// Decided on the read models, expecting the node's version (and each
	// seat's the build claims, in the same atomic batch: rule 24).
	seq, _, err := h.DecideAtomic(ctx, "assign "+r.Module+" to", r.Node, r.CommandID, func(v *projections.View) ([]store.One, error) {
		if err := secretsNeedAdmin(ctx, v, r.Module, m, r.Settings, r.Unset); err != nil {
			return nil, err
		}
		n, err := core.NodeOf(v, r.Node)
		if err != nil {
			return nil, err
		}
		had = n.Assignments[r.Module]
		now = had
		now.Policy = cmp.Or(cmd.Policy, had.Policy.Or())
		c := cmd
		if c.Settings, err = h.Secrets.SealSettings(ctx, r.Node, r.Module, cmd.Spec, r.Settings, had.Settings); err != nil {
			return nil, err
		}
		evs, err := n.Decide(c, h.Now())
		if err != nil || len(evs) == 0 {
			return nil, err
		}
		now.Settings = evs[0].(events.ModuleAssigned).Settings
		claims, err := core.ClaimItems(v, r.Node, r.Module, m, nil)
		return append([]store.One{{Aggregate: events.NodeAggregate(r.Node), Expected: n.Version, Event: evs[0]}}, claims...), err
	})
	if err != nil {
		return wire.Assigned{}, err
	}
	reply := wire.Assigned{Changed: seq != 0, Seq: seq, Node: r.Node, Module: r.Module, Build: cmd.Build, Previous: had.Build,
		Settings: core.ShownSettings(now.Settings), Policy: now.Policy}
	if seq != 0 {
		h.Log.Info("module assigned", "node", r.Node, "module", r.Module, "build", manifest.ShortBuild(cmd.Build), "seq", seq)
		reply.Changes = shownChanges(aggregates.SettingChanges(had.Settings, now.Settings))
		if had.Build != "" && had.Policy.Or() != now.Policy {
			reply.PreviousPolicy = had.Policy.Or()
		}
	}
	return reply, nil
}

// assignCommand is the assignment asked for, its build resolved from the
// catalogue. A module not registered leaves Build empty, for the node
// aggregate to refuse after what it checks first (the node).
func (h *Service) assignCommand(module, build, policy string, settings map[string]string) (aggregates.AssignModule, manifest.Manifest, error) {
	cmd := aggregates.AssignModule{Module: module, Settings: settings}
	var m manifest.Manifest
	p, err := events.ParsePolicy(policy)
	if err != nil {
		return cmd, m, aggregates.Refuse("assign", module, aggregates.ErrInvalid, err.Error()+"; give --policy pinned, manual or auto")
	}
	cmd.Policy = p
	err = h.Proj.Read(func(v *projections.View) error {
		b, got, err := h.world.BuildOf(v, "assign", module, build)
		if errors.Is(err, aggregates.ErrUnknownModule) {
			return nil
		}
		cmd.Build, cmd.Spec, m = b, got.Settings, got
		return err
	})
	return cmd, m, err
}

// Unassign takes a module off a node; one it does not have is nothing to do.
func (h *Service) Unassign(ctx context.Context, r wire.UnassignRequest) (wire.Assigned, error) {
	if err := core.ValidName("unassign from", r.Node); err != nil {
		return wire.Assigned{}, err
	}
	var previous string
	// Any seat the module holds there is let go in the same batch.
	seq, _, err := h.DecideAtomic(ctx, "unassign "+r.Module+" from", r.Node, r.CommandID, func(v *projections.View) ([]store.One, error) {
		n, err := core.NodeOf(v, r.Node)
		if err != nil {
			return nil, err
		}
		previous = n.Assignments[r.Module].Build
		evs, err := n.Decide(aggregates.UnassignModule{Node: r.Node, Module: r.Module}, h.Now())
		if err != nil || len(evs) == 0 {
			return nil, err
		}
		released, err := core.ReleaseItems(v, r.Node, r.Module, "unassigned from "+r.Node)
		return append([]store.One{{Aggregate: events.NodeAggregate(r.Node), Expected: n.Version, Event: evs[0]}}, released...), err
	})
	if err != nil {
		return wire.Assigned{}, err
	}
	if seq != 0 {
		h.Log.Info("module unassigned", "node", r.Node, "module", r.Module, "seq", seq)
	}
	return wire.Assigned{Changed: seq != 0, Seq: seq, Node: r.Node, Module: r.Module, Previous: previous}, nil
}

// shownChanges is changes as a reply may carry them: a secret one as set
// and its version, never its value (rule 21).
func shownChanges(changes []aggregates.SettingChange) []wire.SettingChange {
	out := make([]wire.SettingChange, 0, len(changes))
	for _, c := range changes {
		sealed := func(v *string) bool { return v != nil && secret.IsSealed(*v) }
		out = append(out, wire.SettingChange{Setting: c.Setting, Old: shownValue(c.Old), New: shownValue(c.New), Secret: sealed(c.Old) || sealed(c.New)})
	}
	return out
}

func shownValue(v *string) *string {
	if v == nil {
		return nil
	}
	s := secret.Shown(*v)
	return &s
}
