package network

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"time"

	"github.com/meshctl/mesh/aggregates"
	"github.com/meshctl/mesh/commands/core"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/events/store"
	"github.com/meshctl/mesh/projections"
	"github.com/meshctl/mesh/wire"
)

// The overlay network's verbs (issue 18). The address pool is one
// aggregate: a node's enrolment and its address, a retirement and its
// address given back, land together in one atomic batch expecting both
// the node's and the pool's version, so no address is given twice and no
// node is enrolled without one once the network is set.

// WithPool is decideAtomic with the address pool as the read models hold
// it, for the writes that give or take addresses.
func (h *Service) WithPool(ctx context.Context, op, id, commandID string, decide func(*projections.View, *aggregates.Pool) ([]store.One, error)) (uint64, []store.One, error) {
	return h.DecideAtomic(ctx, op, id, commandID, func(v *projections.View) ([]store.One, error) {
		pool, err := core.PoolOf(v)
		if err != nil {
			return nil, err
		}
		return decide(v, pool)
	})
}

// poolItem is the pool's events as one item of an atomic batch.
func poolItem(pool *aggregates.Pool, evs []events.Event) []store.One {
	var out []store.One
	for _, ev := range evs {
		out = append(out, store.One{Aggregate: events.PoolAggregate(), Expected: pool.Version, Event: ev})
	}
	return out
}

// SetNetwork sets the overlay's range and gives every active node without
// an address one from it: the range, then the addresses in batches of 998
// (a controller stopped between two leaves some without, and network set
// again gives them theirs).
func (h *Service) SetNetwork(ctx context.Context, r wire.NetworkRequest) (wire.NetworkView, error) {
	quarantine := r.Quarantine
	if quarantine == 0 {
		quarantine = aggregates.DefaultQuarantine
	}
	var out wire.NetworkView
	// The range alone: the pool takes one event a batch, and the
	// addresses follow in batches of their own.
	seq, items, err := h.WithPool(ctx, "set the network to", r.CIDR, wire.NewCommandID(), func(v *projections.View, pool *aggregates.Pool) ([]store.One, error) {
		set, err := pool.Set(r.CIDR, quarantine)
		return poolItem(pool, set), err
	})
	if err != nil {
		return out, err
	}
	out.Changed, out.Seq = len(items) > 0, seq
	if out.Allotted, seq, err = h.allotMissing(ctx); err != nil {
		return out, err
	}
	out.Seq = max(out.Seq, seq)
	if out.Changed || out.Allotted > 0 {
		h.Log.Info("network set", "cidr", r.CIDR, "allotted", out.Allotted, "seq", out.Seq)
	}
	view, err := h.ShowNetwork(ctx, wire.Empty{})
	view.Changed, view.Allotted, view.Seq = out.Changed, out.Allotted, out.Seq
	return view, err
}

// allotMissing gives every active node without an address one, in batches
// of 998, and answers how many it gave. An enrolment decided on read models
// that did not hold the range yet has none; network set, and every
// controller's drive, give it one.
func (h *Service) allotMissing(ctx context.Context) (int, uint64, error) {
	total, last := 0, uint64(0)
	for {
		batch := 0
		seq, items, err := h.WithPool(ctx, "give addresses to", "the nodes without one", wire.NewCommandID(), func(v *projections.View, pool *aggregates.Pool) ([]store.One, error) {
			nodes, err := v.Nodes()
			if err != nil {
				return nil, err
			}
			var without []string
			for _, n := range nodes {
				if _, has := pool.Of[n.Name]; !has && !n.Retired && len(without) < wire.MaxBatch-1 {
					without = append(without, n.Name)
				}
			}
			allot, err := pool.Allot(without, nil, h.Now())
			if err != nil {
				return nil, err
			}
			if len(allot) > 0 {
				batch = len(allot[0].(events.AddressesAllotted).Allotted)
			}
			return poolItem(pool, allot), nil
		})
		if err != nil || len(items) == 0 {
			return total, last, err
		}
		total, last = total+batch, seq
	}
}

// DriveNetwork gives an address to every active node that has none while
// the network is set (see allotMissing); it reads the nodes only when
// something that moves composition (an enrolment, the range) was folded
// since it last found none missing.
func (h *Service) DriveNetwork(ctx context.Context) error {
	if h.Writable() != nil || h.Past {
		return nil
	}
	var version uint64
	var set bool
	if err := h.Proj.Read(func(v *projections.View) (err error) {
		version = v.CompositionVersion()
		_, set, err = v.Network()
		return err
	}); err != nil || !set || h.addressSeen.Load() == version {
		return err
	}
	n, _, err := h.allotMissing(ctx)
	if err == nil && n > 0 {
		h.Log.Info("addresses given to nodes enrolled without one", "nodes", n)
	}
	if err == nil {
		h.addressSeen.Store(version)
	}
	return err
}

// ShowNetwork answers the range and every address not free.
func (h *Service) ShowNetwork(_ context.Context, _ wire.Empty) (wire.NetworkView, error) {
	out := wire.NetworkView{Addresses: []projections.AddressRow{}}
	err := h.Proj.Read(func(v *projections.View) error {
		n, found, err := v.Network()
		if err != nil || !found {
			return err
		}
		out.CIDR, out.QuarantineSeconds = n.CIDR, n.QuarantineSeconds
		rows, err := v.Addresses()
		out.Addresses = append(out.Addresses, rows...)
		return err
	})
	return out, err
}

// FixAddress gives an active node the address it asks for, giving back
// the one it had (quarantined like any other).
func (h *Service) FixAddress(ctx context.Context, r wire.AddressRequest) (wire.NetworkView, error) {
	addr, err := netip.ParseAddr(r.Address)
	if err != nil {
		return wire.NetworkView{}, aggregates.Refuse("give an address to", r.Node, aggregates.ErrInvalid, fmt.Sprintf("%q is not an address", r.Address))
	}
	if err := h.ActiveNode(ctx, "give an address to", r.Node); err != nil {
		return wire.NetworkView{}, err
	}
	seq, _, err := h.WithPool(ctx, "give an address to", r.Node, r.CommandID, func(v *projections.View, pool *aggregates.Pool) ([]store.One, error) {
		if pool.Of[r.Node] == addr {
			return nil, nil
		}
		evs, err := pool.Allot([]string{r.Node}, map[string]netip.Addr{r.Node: addr}, h.Now())
		return poolItem(pool, evs), err
	})
	if err != nil {
		return wire.NetworkView{}, err
	}
	view, err := h.ShowNetwork(ctx, wire.Empty{})
	view.Changed, view.Seq = seq != 0, seq
	return view, err
}

// EnrollItems decides an enrolment of each request (a fresh name, or one
// enrolled the same way already: unchanged), with their addresses from the
// pool in the same batch when the network is set.
func (h *Service) EnrollItems(v *projections.View, pool *aggregates.Pool, reqs []wire.EnrollRequest, batch bool) ([]store.One, []string, error) {
	var items []store.One
	var unchanged, fresh []string
	fixed := map[string]netip.Addr{}
	for _, req := range reqs {
		// A fresh aggregate decides: it validates and normalises the
		// capabilities and labels.
		evs, err := aggregates.NewNode(req.Name).Decide(aggregates.EnrollNode{Name: req.Name, Capabilities: req.Capabilities, Labels: req.Labels}, h.Now())
		if err != nil {
			return nil, nil, err
		}
		want := evs[0].(events.NodeEnrolled)
		row, found, err := v.Node(req.Name)
		if err != nil {
			return nil, nil, err
		}
		if found {
			if !batch || row.Retired || !slices.Equal(row.Capabilities, want.Capabilities) || !maps.Equal(core.OrEmpty(row.Labels), want.Labels) {
				return nil, nil, takenName(row, batch)
			}
			unchanged = append(unchanged, req.Name)
			continue
		}
		if req.Address != "" {
			addr, err := netip.ParseAddr(req.Address)
			if err != nil {
				return nil, nil, aggregates.Refuse("enroll", req.Name, aggregates.ErrInvalid, fmt.Sprintf("--address %q is not an address", req.Address))
			}
			fixed[req.Name] = addr
		}
		// Expecting no event at all on the aggregate: a name enrolled since
		// the read models last looked fails the whole batch, which is
		// decided again.
		items = append(items, store.One{Aggregate: events.NodeAggregate(req.Name), Expected: 0, Event: want})
		fresh = append(fresh, req.Name)
	}
	allot, err := pool.Allot(fresh, fixed, h.Now())
	if err != nil {
		return nil, nil, err
	}
	return append(items, poolItem(pool, allot)...), unchanged, nil
}

// takenName is the refusal of a name already enrolled.
func takenName(row projections.Node, batch bool) error {
	state := "enrolled"
	if row.Retired {
		state = "retired"
	}
	detail := fmt.Sprintf("the name is taken (a node of that name was %s on %s); choose another name", state, row.EnrolledAt.UTC().Format(time.RFC3339))
	if batch {
		detail = "a node of that name is already enrolled with other capabilities or labels, or retired; no node of this batch was enrolled; take it out of the list or choose another name"
	}
	return aggregates.Refuse("enroll", row.Name, aggregates.ErrNameTaken, detail)
}

// RetireItems decides a retirement, with the node's address given back in
// the same batch.
func (h *Service) RetireItems(v *projections.View, pool *aggregates.Pool, name string) ([]store.One, error) {
	node, err := core.NodeOf(v, name)
	if err != nil {
		return nil, err
	}
	evs, err := node.Decide(aggregates.RetireNode{Name: name}, h.Now())
	if err != nil || len(evs) == 0 {
		return nil, err
	}
	items := []store.One{{Aggregate: events.NodeAggregate(name), Expected: node.Version, Event: evs[0]}}
	released, err := core.ReleaseItems(v, name, "", name+" retired")
	items = append(items, released...)
	return append(items, poolItem(pool, pool.Releases(name))...), err
}
