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

// Enroll adds a node, with its overlay address when the network is set. A
// name taken by any node, retired or not, is refused.
func (h *Service) Enroll(ctx context.Context, r wire.EnrollRequest) (wire.Changed, error) {
	if err := core.ValidName("enroll", r.Name); err != nil {
		return wire.Changed{}, err
	}
	// Read models that do not hold the network yet would enrol the node
	// without an address: caught up first when they say there is none
	// (the drive gives one to a node that slips past even so).
	if err := h.Writable(); err != nil {
		return wire.Changed{}, err
	}
	var set bool
	if err := h.Proj.Read(func(v *projections.View) (err error) { _, set, err = v.Network(); return err }); err != nil {
		return wire.Changed{}, err
	}
	if !set {
		if err := h.CatchUp(ctx); err != nil {
			return wire.Changed{}, err
		}
	}
	seq, _, err := h.network.WithPool(ctx, "enroll", r.Name, r.CommandID, func(v *projections.View, pool *aggregates.Pool) ([]store.One, error) {
		items, _, err := h.network.EnrollItems(v, pool, []wire.EnrollRequest{r}, false)
		return items, err
	})
	if err != nil {
		return wire.Changed{}, err
	}
	h.Log.Info("node enrolled", "node", r.Name, "seq", seq)
	c, err := h.changed(r.Name, seq)
	if err != nil {
		return c, err
	}
	c.Identity, err = h.tokens.NodeToken(ctx, r.Name, false)
	return c, err
}

// Retire takes a node out of service for good, giving its overlay address
// back; retiring a retired node is answered as nothing to do.
func (h *Service) Retire(ctx context.Context, r wire.RetireRequest) (wire.Changed, error) {
	if err := core.ValidName("retire", r.Name); err != nil {
		return wire.Changed{}, err
	}
	seq, _, err := h.network.WithPool(ctx, "retire", r.Name, r.CommandID, func(v *projections.View, pool *aggregates.Pool) ([]store.One, error) {
		return h.network.RetireItems(v, pool, r.Name)
	})
	if err != nil {
		return wire.Changed{}, err
	}
	if seq != 0 {
		h.Log.Info("node retired", "node", r.Name, "seq", seq)
	}
	return h.changed(r.Name, seq)
}

// ChangeNode replaces a node's declared capabilities and labels (each when
// given). What it would be sent follows: plan and push --behind show it.
func (h *Service) ChangeNode(ctx context.Context, r wire.ChangeNodeRequest) (wire.Changed, error) {
	if err := core.ValidName("change", r.Name); err != nil {
		return wire.Changed{}, err
	}
	if r.Capabilities == nil && r.Labels == nil {
		return wire.Changed{}, aggregates.Refuse("change", r.Name, aggregates.ErrInvalid, "give --capability or --label (or --clear-capabilities, --clear-labels): there is nothing to change")
	}
	seq, _, err := h.DecideAtomic(ctx, "change", r.Name, r.CommandID, func(v *projections.View) ([]store.One, error) {
		n, err := core.NodeOf(v, r.Name)
		if err != nil {
			return nil, err
		}
		evs, err := n.Decide(aggregates.ChangeNode{Name: r.Name, Capabilities: r.Capabilities, Labels: r.Labels}, h.Now())
		if err != nil || len(evs) == 0 {
			return nil, err
		}
		return []store.One{{Aggregate: events.NodeAggregate(r.Name), Expected: n.Version, Event: evs[0]}}, nil
	})
	if err != nil {
		return wire.Changed{}, err
	}
	if seq != 0 {
		h.Log.Info("node changed", "node", r.Name, "seq", seq)
	}
	return h.changed(r.Name, seq)
}

func (h *Service) changed(name string, seq uint64) (wire.Changed, error) {
	var out wire.Changed
	err := h.Proj.Read(func(v *projections.View) error {
		n, found, err := v.Node(name)
		if err != nil {
			return err
		}
		if !found {
			return fmt.Errorf("node %s was written at %d but the read models do not hold it", name, seq)
		}
		out = wire.Changed{Changed: seq != 0, Seq: seq}
		out.Node, err = core.NodeView(v, n)
		return err
	})
	return out, err
}

// ListNodes answers every node from the read models. Every assignment and
// every module row is read once, in one scan each: a lookup per node, and
// one module's row decoded again for each of its ten thousand nodes, were
// most of node list's time. Brief leaves out what the table does not show.
func (h *Service) ListNodes(_ context.Context, r wire.ListRequest) (wire.NodeList, error) {
	out := wire.NodeList{Nodes: []wire.NodeView{}}
	err := h.Proj.Read(func(v *projections.View) error {
		nodes, err := v.Nodes()
		if err != nil {
			return err
		}
		out.Nodes = make([]wire.NodeView, 0, len(nodes))
		addresses, err := v.NodeAddresses()
		if err != nil {
			return err
		}
		lives, err := v.Liveness()
		if err != nil {
			return err
		}
		// reach is what node list says of a node's liveness.
		reach := func(nv *wire.NodeView) {
			if lv := lives.Of(nv.Name); lv.Unreachable && !nv.Retired {
				nv.UnreachableSince = &lv.Since
			}
			if at := h.live.LastHeard(nv.Name); !at.IsZero() {
				nv.LastHeard = &at
			}
		}
		if r.Brief {
			for _, n := range nodes {
				nv := wire.NodeView{Name: n.Name, Capabilities: n.Capabilities, Labels: n.Labels,
					Retired: n.Retired, EnrolledAt: n.EnrolledAt, Address: addresses[n.Name]}
				if !n.RetiredAt.IsZero() {
					at := n.RetiredAt // when, not the enrolment's time: node list says since when
					nv.RetiredAt = &at
				}
				reach(&nv)
				out.Nodes = append(out.Nodes, nv)
			}
			return nil
		}
		latest, err := core.LatestBuilds(v)
		if err != nil {
			return err
		}
		all, err := v.Assignments() // by node, then module
		if err != nil {
			return err
		}
		for _, n := range nodes {
			nv := core.ViewOf(n)
			nv.Address = addresses[n.Name]
			reach(&nv)
			// Both lists are in name order: walk them together.
			for len(all) > 0 && all[0].Node < n.Name {
				all = all[1:]
			}
			for len(all) > 0 && all[0].Node == n.Name {
				nv.Assignments = append(nv.Assignments, core.AssignmentView(all[0], latest[all[0].Module]))
				all = all[1:]
			}
			out.Nodes = append(out.Nodes, nv)
		}
		return nil
	})
	return out, err
}
