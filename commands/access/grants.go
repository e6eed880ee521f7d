package access

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/meshctl/mesh/busauth"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/events/store"
)

// Permissions follow the log at once (issue 29). A connection keeps what
// the callout granted it at connect, so when the log takes a grant away
// the controller ends the connections holding it, once its read models
// hold the change, and each is decided again as the log now says: a
// retired node's connections (its own and its modules'), a module
// unassigned from a node, a seat's holder once its handover starts (it
// connects again without the seat) or the seat is released. Every
// controller does this for every such event it reads, so it does not
// matter which one appended it; one that was not running then sweeps
// every connection when it starts (busauth.Cutter.Sweep).

// grantEvents are the subjects of the events after which a live connection
// may hold more than the log now grants (events.MovesGrants): each under
// its aggregate's kind.
var grantEvents = func() []string {
	var out []string
	for _, typ := range events.TypesMoving(events.MovesGrants) {
		out = append(out, events.EventPrefix+"."+events.Rights[typ].Kind+".*."+typ)
	}
	return out
}()

// grantUsers names, for each event type that moves grants, the bus users
// whose grant it takes away. TestEveryGrantEventCuts holds it to
// events.MovesGrants: a type there and not here would cut nobody.
var grantUsers = map[string]func(events.Event) []string{
	"NodeRetired": func(e events.Event) []string { return []string{e.(events.NodeRetired).Name} },
	"ModuleUnassigned": func(e events.Event) []string {
		u := e.(events.ModuleUnassigned)
		return []string{events.ModuleUser(u.Node, u.Module)}
	},
	"SeatHandoverStarted": func(e events.Event) []string {
		h := e.(events.SeatHandoverStarted)
		return []string{events.ModuleUser(h.From, h.Module)}
	},
	"SeatHandedOver": func(e events.Event) []string {
		h := e.(events.SeatHandedOver)
		return []string{events.ModuleUser(h.From, h.Module)}
	},
	"SeatReleased": func(e events.Event) []string {
		r := e.(events.SeatReleased)
		return []string{events.ModuleUser(r.Node, r.Module)}
	},
	// A removed operator (issue 33): its key is refused from the next
	// connect on, and this ends the connections it holds now.
	"OperatorRemoved": func(e events.Event) []string { return []string{busauth.OperatorUser(e.(events.OperatorRemoved).Name)} },
}

// CutNode ends every live connection of node and of the modules running
// there, so each connects again and is decided from the read models as
// they are now: for whatever changes what node may present or do (a
// retirement does it by itself; a re-keying should call it once its event
// is folded). It says how many it ended; on an open bus, which grants
// nothing, none.
func (h *Service) CutNode(ctx context.Context, node string) (int, error) {
	if h.cutter == nil {
		return 0, nil
	}
	return h.cutter.CutWhere(ctx, cutsNode(node))
}

// CutUsers ends every live connection of each user, and says how many; on
// an open bus, which grants nothing, none.
func (h *Service) CutUsers(ctx context.Context, users ...string) (int, error) {
	if h.cutter == nil {
		return 0, nil
	}
	return h.cutter.Cut(ctx, users...)
}

// followGrants ends the connections whose grant each new event of
// grantEvents takes away, after it is folded, until stopped; then sweeps
// the connections open now, which may hold grants taken away while no
// controller was running. It reads from the stream's end as it is now, so
// nothing appended after the sweep's list can be missed.
func (h *Service) followGrants() (stop func(), err error) {
	ctx, cancel := context.WithCancel(context.Background())
	st, err := h.Store.State(ctx)
	if err != nil {
		cancel()
		return nil, err
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		from := st.LastSeq + 1
		for ctx.Err() == nil {
			err := h.Store.Read(ctx, store.ReadOptions{From: from, Follow: true, Filters: grantEvents}, func(m store.Msg) error {
				from = m.Seq + 1
				h.cutGrant(ctx, m)
				return nil
			})
			if ctx.Err() == nil {
				h.Log.Warn("cannot follow the log to end connections whose grant it takes away; trying again", "err", err)
				select {
				case <-ctx.Done():
				case <-time.After(time.Second):
				}
			}
		}
	}()
	go func() {
		defer wg.Done()
		sctx, scancel := context.WithTimeout(ctx, time.Minute)
		defer scancel()
		n, err := h.cutter.Sweep(sctx, directory{h})
		switch {
		case err != nil && ctx.Err() == nil:
			h.Log.Warn("cannot sweep the bus's connections for grants the log took away", "err", err)
		case n > 0:
			h.Log.Info("ended connections whose grant the log took away while no controller was running", "connections", n)
		}
	}()
	return func() { cancel(); wg.Wait() }, nil
}

// cutGrant ends the connections whose grant m takes away. A message that
// is not the controller's event (the fold sets it aside) ends nothing.
func (h *Service) cutGrant(ctx context.Context, m store.Msg) {
	_, ev, err := events.Read(m.Subject, m.Data)
	if err != nil {
		return
	}
	who, ok := grantUsers[ev.EventType()]
	if !ok {
		return
	}
	users := who(ev)
	// Not before the read models hold it: a connection ended earlier
	// would be decided again from the grant it is losing.
	if err := h.Proj.WaitFor(ctx, m.Seq); err != nil {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var n int
	if _, retired := ev.(events.NodeRetired); retired {
		n, err = h.CutNode(cctx, users[0])
	} else {
		n, err = h.cutter.Cut(cctx, users...)
	}
	switch {
	case err != nil && !errors.Is(err, context.Canceled):
		h.Log.Warn("cannot end connections whose grant the log took away; the next start of the controller sweeps them", "users", users, "err", err)
	case n > 0:
		h.Log.Info("ended connections whose grant the log took away: they are decided again", "users", users, "event", ev.EventType(), "connections", n)
	}
}
