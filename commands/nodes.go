package commands

import (
	"context"
	"fmt"

	"github.com/meshctl/mesh/aggregates"
	"github.com/meshctl/mesh/commands/access"
	"github.com/meshctl/mesh/commands/core"
	"github.com/meshctl/mesh/commands/credentials"
	"github.com/meshctl/mesh/commands/history"
	"github.com/meshctl/mesh/commands/liveness"
	"github.com/meshctl/mesh/commands/network"
	"github.com/meshctl/mesh/commands/push"
	"github.com/meshctl/mesh/commands/rollout"
	"github.com/meshctl/mesh/commands/seats"
	"github.com/meshctl/mesh/commands/status"
	"github.com/meshctl/mesh/commands/world"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/events/store"
	"github.com/meshctl/mesh/projections"
	"github.com/meshctl/mesh/wire"
)

// newHandlers are the verbs over c, every cache empty.
func newHandlers(c *core.Core) *Handlers { return newHandlersFlooding(c, nil, nil) }

// newHandlersFlooding are the verbs over c, counting floods with flood
// and cutting with cut (both nil: neither).
func newHandlersFlooding(c *core.Core, flood *access.FloodWatch, cut func(match func(user string) bool) (int, error)) *Handlers {
	w := world.New(c)
	h := &Handlers{Core: c, Composer: w, pushVerbs: push.New(c, w), liveVerbs: liveness.New(c), historyVerbs: history.New(c)}
	h.credentialVerbs = credentials.New(c, w, h.pushVerbs)
	h.networkVerbs = network.New(c)
	h.seatVerbs = seats.New(c, w, h.pushVerbs)
	h.statusVerbs = status.New(c, w, h.liveVerbs, h.pushVerbs)
	h.rolloutVerbs = rollout.New(c, w, h.pushVerbs, h.statusVerbs)
	h.accessVerbs = access.New(c, w, h.networkVerbs, flood, cut)
	return h
}

// The services Handlers embeds while the verbs move into packages of
// their own (issue 30), named so that their field names differ.
type (
	pushVerbs       = push.Service
	liveVerbs       = liveness.Service
	historyVerbs    = history.Service
	credentialVerbs = credentials.Service
	networkVerbs    = network.Service
	seatVerbs       = seats.Service
	statusVerbs     = status.Service
	rolloutVerbs    = rollout.Service
	accessVerbs     = access.Service
)

// Handlers are the verbs, bound to one store and one set of read models.
type Handlers struct {
	*core.Core
	*world.Composer
	*pushVerbs
	*liveVerbs
	*historyVerbs
	*credentialVerbs
	*networkVerbs
	*seatVerbs
	*statusVerbs
	*rolloutVerbs
	*accessVerbs
}

// Enroll adds a node, with its overlay address when the network is set. A
// name taken by any node, retired or not, is refused.
func (h *Handlers) Enroll(ctx context.Context, r wire.EnrollRequest) (wire.Changed, error) {
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
	seq, _, err := h.WithPool(ctx, "enroll", r.Name, r.CommandID, func(v *projections.View, pool *aggregates.Pool) ([]store.One, error) {
		items, _, err := h.EnrollItems(v, pool, []wire.EnrollRequest{r}, false)
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
	c.Identity, err = h.NodeToken(ctx, r.Name, false)
	return c, err
}

// Retire takes a node out of service for good, giving its overlay address
// back; retiring a retired node is answered as nothing to do.
func (h *Handlers) Retire(ctx context.Context, r wire.RetireRequest) (wire.Changed, error) {
	if err := core.ValidName("retire", r.Name); err != nil {
		return wire.Changed{}, err
	}
	seq, _, err := h.WithPool(ctx, "retire", r.Name, r.CommandID, func(v *projections.View, pool *aggregates.Pool) ([]store.One, error) {
		return h.RetireItems(v, pool, r.Name)
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
func (h *Handlers) ChangeNode(ctx context.Context, r wire.ChangeNodeRequest) (wire.Changed, error) {
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

func (h *Handlers) changed(name string, seq uint64) (wire.Changed, error) {
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
func (h *Handlers) ListNodes(_ context.Context, r wire.ListRequest) (wire.NodeList, error) {
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
			if lv := lives[nv.Name]; lv.Unreachable && !nv.Retired {
				nv.UnreachableSince = &lv.Since
			}
			if at := h.LastHeard(nv.Name); !at.IsZero() {
				nv.LastHeard = &at
			}
		}
		if r.Brief {
			for _, n := range nodes {
				nv := wire.NodeView{Name: n.Name, Capabilities: n.Capabilities, Labels: n.Labels,
					Retired: n.Retired, EnrolledAt: n.EnrolledAt, Address: addresses[n.Name]}
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
