package nodes

import (
	"context"
	"fmt"

	"github.com/meshctl/mesh/aggregates"
	"github.com/meshctl/mesh/commands/core"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/events/store"
	"github.com/meshctl/mesh/projections"
	"github.com/meshctl/mesh/wire"
)

// EnrollBatch enrolls many nodes all or nothing: either every node it
// names that is not yet enrolled is enrolled, or none is. A node already
// enrolled with exactly these capabilities and labels is nothing to do (so a
// list can be given again after a failure part way); one enrolled
// differently, or retired, refuses the whole batch.
func (h *Service) EnrollBatch(ctx context.Context, r wire.EnrollBatchRequest) (wire.BatchReply, error) {
	if err := h.Writable(); err != nil {
		return wire.BatchReply{}, err
	}
	if err := batchSize("enroll", len(r.Nodes)); err != nil {
		return wire.BatchReply{}, err
	}
	seen := map[string]bool{}
	for _, n := range r.Nodes {
		if err := core.ValidName("enroll", n.Name); err != nil {
			return wire.BatchReply{}, err
		}
		if seen[n.Name] {
			return wire.BatchReply{}, aggregates.Refuse("enroll", n.Name, aggregates.ErrInvalid, "it is named twice in one list; name each node once")
		}
		seen[n.Name] = true
	}
	return h.decideBatch(ctx, "enroll", fmt.Sprintf("%d nodes", len(r.Nodes)), r.CommandID, "enrolled", func(v *projections.View) ([]store.One, []string, error) {
		pool, err := core.PoolOf(v)
		if err != nil {
			return nil, nil, err
		}
		return h.network.EnrollItems(v, pool, r.Nodes, true)
	})
}

// AssignBatch gives many nodes a module's latest build, all or nothing: a
// node that is not enrolled, or retired, refuses the whole batch; one that
// already holds that build with those settings is nothing to do.
func (h *Service) AssignBatch(ctx context.Context, r wire.AssignBatchRequest) (wire.BatchReply, error) {
	if err := h.Writable(); err != nil {
		return wire.BatchReply{}, err
	}
	if err := batchSize("assign", len(r.Nodes)); err != nil {
		return wire.BatchReply{}, err
	}
	seen := map[string]bool{}
	for _, n := range r.Nodes {
		if err := core.ValidName("assign to", n); err != nil {
			return wire.BatchReply{}, err
		}
		if seen[n] {
			return wire.BatchReply{}, aggregates.Refuse("assign to", n, aggregates.ErrInvalid, "it is named twice in one list; name each node once")
		}
		seen[n] = true
	}
	var build string
	reply, err := h.decideBatch(ctx, "assign "+r.Module+" to", fmt.Sprintf("%d nodes", len(r.Nodes)), r.CommandID, "assigned", func(v *projections.View) ([]store.One, []string, error) {
		cmd, m, err := h.assignCommand(r.Module, r.Build, r.Policy, r.Settings)
		if err != nil {
			return nil, nil, err
		}
		if err := secretsNeedAdmin(ctx, v, r.Module, m, r.Settings, r.Unset); err != nil {
			return nil, nil, err
		}
		build, cmd.Unset, cmd.Reset = cmd.Build, r.Unset, r.Reset
		var items []store.One
		var unchanged []string
		seats := map[string]string{} // seat -> the node this batch gives it
		claim := func(node string) error {
			claims, err := core.ClaimItems(v, node, r.Module, m, seats)
			items = append(items, claims...)
			return err
		}
		for _, name := range r.Nodes {
			n, err := core.NodeOf(v, name)
			if err != nil {
				return nil, nil, err
			}
			cmd.Node = name
			if cmd.Settings, err = h.Secrets.SealSettings(ctx, name, r.Module, cmd.Spec, r.Settings, n.Assignments[r.Module].Settings); err != nil {
				return nil, nil, err
			}
			evs, err := n.Decide(cmd, h.Now())
			if err != nil {
				return nil, nil, err
			}
			if len(evs) == 0 {
				unchanged = append(unchanged, name)
				continue
			}
			items = append(items, store.One{Aggregate: events.NodeAggregate(name), Expected: n.Version, Event: evs[0]})
			if err := claim(name); err != nil {
				return nil, nil, err
			}
		}
		return items, unchanged, nil
	})
	reply.Build = build
	return reply, err
}

// decideBatch decides a batch from the read models and appends it as one
// atomic batch (decideAtomic): when any aggregate of it moved meanwhile,
// nothing landed, and it catches up and decides again.
func (h *Service) decideBatch(ctx context.Context, op, id, commandID, verb string, decideFn func(*projections.View) ([]store.One, []string, error)) (wire.BatchReply, error) {
	var unchanged []string
	seq, items, err := h.DecideAtomic(ctx, op, id, commandID, func(v *projections.View) (items []store.One, err error) {
		items, unchanged, err = decideFn(v)
		return items, err
	})
	if err != nil {
		return wire.BatchReply{}, err
	}
	reply := wire.BatchReply{Seq: seq, Unchanged: orNone(unchanged), Changed: []string{}}
	for _, it := range items {
		if it.Aggregate.Kind == events.KindNode { // not the address pool's, nor a seat's
			reply.Changed = append(reply.Changed, it.Aggregate.ID)
		}
	}
	if seq != 0 {
		h.Log.Info("nodes "+verb+" in a batch", "nodes", len(reply.Changed), "unchanged", len(unchanged), "seq", seq)
	}
	return reply, nil
}

func batchSize(op string, n int) error {
	switch {
	case n == 0:
		return aggregates.Refuse(op, "a batch", aggregates.ErrInvalid, "it names no node; give at least one")
	case n > wire.MaxBatch:
		return aggregates.Refuse(op, "a batch", aggregates.ErrInvalid, fmt.Sprintf("it names %d nodes, over the %d one batch may hold; send the list in batches (mesh does)", n, wire.MaxBatch))
	}
	return nil
}

func orNone(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
