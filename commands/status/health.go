package status

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/meshctl/mesh/commands/core"
	"github.com/meshctl/mesh/commands/credentials"
	"github.com/meshctl/mesh/commands/seats"
	"github.com/meshctl/mesh/commands/world"
	"github.com/meshctl/mesh/projections"
	"github.com/meshctl/mesh/verdict"
	"github.com/meshctl/mesh/wire"
	"github.com/nats-io/nats.go/jetstream"
)

// Rule 14 holds only if the read models status answers from can be
// trusted: status never calls a sick mesh well. Beside every node's state
// and every standing, these are the causes a mesh is not well that no node
// row shows.

// lagTolerance is how far behind the stream the read models may be before
// status says so: a busy mesh is always a few events behind for a moment.
const lagTolerance = 3 * time.Second

// causes answers why the mesh is not well beyond its nodes and standings:
// the fold stopped, or behind the stream, and foreign messages not yet
// acknowledged. None for the past (status --as-of), which is a fold of its
// own up to a moment.
//
// composed is the caller's, asked for before its read: asked for inside it,
// composition reads the engine again under its read lock, which a writer
// waiting between the two (a rebuild's swap, a close) would wedge.
func (h *Service) causes(ctx context.Context, v *projections.View, composed *world.Composed) ([]string, error) {
	out := []string{}
	if !h.Past {
		if bus := h.BusCause(); bus != "" {
			out = append(out, bus)
		}
		var fe *projections.FoldError
		if errors.As(h.Proj.Failure(), &fe) {
			out = append(out, fmt.Sprintf("the read models stopped at event %d and hold nothing after it: %v", fe.Seq, strings.TrimPrefix(core.Refusal(fe).Error(), wire.ErrReadOnly.Error()+": ")))
		} else if errors.As(h.Proj.Stalled(), &fe) {
			out = append(out, fmt.Sprintf("the read models cannot be written (a full disk?), and hold nothing after event %d until they can: %v", h.Proj.Checkpoint(), fe.Err))
		} else if lag, err := h.lag(ctx, v.Checkpoint()); errors.Is(err, jetstream.ErrStreamNotFound) {
			// Not "cannot be read": the log itself is gone, and these read
			// models are all that is left of it.
			out = append(out, fmt.Sprintf("the bus no longer has the stream %s these read models were folded from: writes have nowhere to land; stop the mesh and restore a backup (mesh restore)", h.Store.Name()))
		} else if err != nil {
			out = append(out, "the stream's position cannot be read, so these read models cannot be trusted to be current: "+err.Error())
		} else if lag != "" {
			out = append(out, lag)
		}
	}
	open, err := credentials.OpenRotations(v)
	if err != nil {
		return nil, err
	}
	for _, r := range open {
		out = append(out, r.String())
	}
	held, err := v.Seats()
	if err != nil {
		return nil, err
	}
	for _, s := range held {
		if s.HandoverTo == "" {
			continue
		}
		out = append(out, fmt.Sprintf("seat %s is being handed over from %s to %s: %s", s.Seat, s.Node, s.HandoverTo, seats.WaitsFor(v, s, composed.Of(s.Node))))
	}
	floods, err := v.OpenFloods()
	if err != nil {
		return nil, err
	}
	for _, f := range floods {
		out = append(out, fmt.Sprintf("%s (event %d); it was refused at connect until %s: find out why that machine wrote it (retire it if it is not yours any more), then mesh foreign ack %d",
			verdict.Flooded(f.Node, f.Reports, f.Foreign, f.Bytes, f.To.Sub(f.From)), f.Seq, f.Until.UTC().Format(time.RFC3339), f.Seq))
	}
	n, first, err := v.OpenForeign()
	if err != nil {
		return nil, err
	}
	if n > 0 {
		out = append(out, fmt.Sprintf("%d foreign message(s) not acknowledged, the first event %d on %s: %s (mesh foreign list; mesh foreign ack SEQ, or --all)",
			n, first.Seq, first.Subject, first.Reason))
	}
	return out, nil
}

// lag says how far the read models are behind the stream, when it is past
// lagTolerance: in events, and in the age of the oldest event not folded.
func (h *Service) lag(ctx context.Context, checkpoint uint64) (string, error) {
	st, err := h.Store.State(ctx)
	if err != nil || st.LastSeq <= checkpoint {
		return "", err
	}
	m, err := h.Store.Get(ctx, checkpoint+1)
	if err != nil {
		// Folded meanwhile, or a gap the fold will pass over: not a lag.
		return "", nil
	}
	age := h.Now().Sub(m.Time)
	if age < lagTolerance {
		return "", nil
	}
	return fmt.Sprintf("the read models are %d event(s) behind the stream; the oldest not folded was stored %s ago", st.LastSeq-checkpoint, age.Round(time.Second)), nil
}

// partial turns a node that is current with what could be composed into
// partial when a module assigned to it, or a unit of one, was left out.
func partial(state wire.State, detail string, w world.Would) (wire.State, string) {
	left := w.LeftOut()
	if state != wire.StateCurrent || len(left) == 0 {
		return state, detail
	}
	parts := make([]string, len(left))
	for i, l := range left {
		parts[i] = l.Module + " left out: " + l.Reason
		if l.Unit != "" {
			// The module is there; its unit is not, and its reason names both.
			parts[i] = "left out: " + l.Reason
		}
	}
	return wire.StatePartial, strings.Join(parts, "; ")
}
