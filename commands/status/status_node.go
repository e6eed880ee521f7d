package status

import (
	"context"
	"errors"

	"github.com/meshctl/mesh/aggregates"
	"github.com/meshctl/mesh/commands/core"
	"github.com/meshctl/mesh/commands/liveness"
	"github.com/meshctl/mesh/commands/world"
	"github.com/meshctl/mesh/projections"
	"github.com/meshctl/mesh/wire"
)

// ShowNode answers one node, or says it is not enrolled.
func (h *Service) ShowNode(ctx context.Context, r wire.NameRequest) (wire.NodeView, error) {
	if !r.AsOf.IsZero() {
		var out wire.NodeView
		err := h.inThePast(ctx, r.AsOf, func(past *Service) (err error) {
			out, err = past.ShowNode(ctx, wire.NameRequest{Name: r.Name})
			return err
		})
		if errors.Is(err, aggregates.ErrUnknownNode) {
			err = h.NotYetEnrolled(r.Name, r.AsOf)
		}
		out.AsOf = &r.AsOf
		return out, err
	}
	if err := core.ValidName("show", r.Name); err != nil {
		return wire.NodeView{}, err
	}
	var out wire.NodeView
	var row projections.Node
	var drifts map[string]projections.Drift
	var holds map[string]string
	var live projections.Liveness
	// Before the read, as status asks for it: causes read it (a seat's
	// handover), and so does the node's state below.
	composed, err := h.world.ComposeAll()
	if err != nil {
		return wire.NodeView{}, err
	}
	err = h.Proj.Read(func(v *projections.View) error {
		causes, err := h.causes(ctx, v, composed)
		if err != nil {
			return err
		}
		n, found, err := v.Node(r.Name)
		if err != nil {
			return err
		}
		if !found {
			return aggregates.Refuse("show", r.Name, aggregates.ErrUnknownNode, "no node of that name is enrolled; see mesh node list")
		}
		if out, err = core.NodeView(v, n); err != nil {
			return err
		}
		standings, err := v.Standings()
		hosts := map[string]bool{}
		for _, a := range out.Assignments {
			hosts[a.Module] = true
		}
		for _, s := range standings {
			if s.Machine == n.Name || hosts[s.Consumer] {
				out.Standings = append(out.Standings, wire.StandingView(s))
			}
		}
		if err != nil {
			return err
		}
		if out.Runtimes, err = v.RuntimesOf(n.Name); err != nil {
			return err
		}
		if f, found, err := v.NodeFacts(n.Name); err != nil {
			return err
		} else if found {
			out.Facts, out.Detected = f.Facts, f.Capabilities
		}
		if drifts, err = v.Drifts(); err != nil {
			return err
		}
		if holds, err = holdsOf(v, n.Name); err != nil {
			return err
		}
		if live, err = v.NodeLiveness(n.Name); err != nil {
			return err
		}
		if live.Unreachable {
			out.UnreachableSince = &live.Since
		}
		for i, rt := range out.Runtimes {
			out.Runtimes[i] = liveness.RuntimeOn(rt, live)
		}
		if at := h.live.LastHeard(n.Name); !at.IsZero() {
			out.LastHeard = &at
		}
		row = n
		out.Causes = causes
		return nil
	})
	if err != nil || row.Retired {
		return out, err
	}
	w := composed.Of(r.Name)
	state, since, detail := w.StateOf(row)
	state, detail = partial(state, detail, w)
	state, detail = world.Drifted(state, detail, row, drifts)
	state, detail = held(state, detail, holds[r.Name])
	state, since, detail = liveness.Unreachable(state, since, detail, live)
	out.State, out.Since, out.Detail, out.WouldSend = state, &since, detail, w.ContentDigest
	out.LeftOut, out.Unresolved, out.Chosen = w.LeftOut(), w.Unresolved(), w.Chosen
	return out, nil
}

// ProjectionsStatus says where the read models stand against the stream.
func (h *Service) ProjectionsStatus(ctx context.Context, _ wire.Empty) (wire.StatusReply, error) {
	return h.Proj.Status(ctx)
}

// RebuildProjections folds the stream into fresh read models and swaps them in.
func (h *Service) RebuildProjections(ctx context.Context, req wire.FoldRequest) (wire.RebuildReply, error) {
	// Long, and beside the live generation: the second's cap on garbage
	// binds throughout; the first's end gives the fold's memory back.
	restoreGC, besideGC := core.FoldingGC(), core.BesideGC()
	r, err := h.Proj.Rebuild(ctx, h.Progress(req.Progress))
	besideGC()
	restoreGC()
	if err != nil {
		return wire.RebuildReply{}, err
	}
	h.Log.Info("projections rebuilt", "from", r.From, "to", r.To, "events", r.Events, "seconds", r.Elapsed.Seconds())
	return wire.RebuildReply{From: r.From, To: r.To, Events: r.Events, Checkpoint: r.Checkpoint, Seconds: r.Elapsed.Seconds()}, nil
}
