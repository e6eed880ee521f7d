package access

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/meshctl/mesh/aggregates"
	"github.com/meshctl/mesh/commands/core"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/projections"
	"github.com/meshctl/mesh/wire"
)

// ListForeign lists the foreign messages.
func (h *Service) ListForeign(_ context.Context, _ wire.Empty) (wire.ForeignList, error) {
	out := wire.ForeignList{Foreign: []projections.ForeignMessage{}}
	err := h.Proj.Read(func(v *projections.View) error {
		all, err := v.Foreign()
		out.Foreign = append(out.Foreign, all...)
		for _, f := range all {
			if f.Acked == 0 {
				out.Open++
			}
		}
		return err
	})
	return out, err
}

// AckForeign records that the operator has seen foreign messages: an event
// of its own, so the log says who saw what and when. A sequence that is not
// a foreign message is refused whole, and nothing is recorded. Many at once
// (All, or a range) are one event naming the range, however many it holds.
func (h *Service) AckForeign(ctx context.Context, r wire.AckRequest) (wire.Acked, error) {
	if err := h.Writable(); err != nil {
		return wire.Acked{}, err
	}
	if err := checkAck(r); err != nil {
		return wire.Acked{}, err
	}
	var out wire.Acked
	var ev events.ForeignAcknowledged
	agg := events.ForeignAggregate()
	// Decided on the read models (which messages are foreign, which were
	// acknowledged): caught up again after a conflict.
	err := core.DecideAndAppend(ctx, "acknowledge", "foreign messages", h.CatchUp, func(int) (err error) {
		if out, ev, err = h.decideAck(r); err != nil || len(out.Acknowledged) == 0 {
			return err
		}
		version, err := h.Store.Version(ctx, agg)
		if err != nil {
			return err
		}
		out.Seq, err = h.Store.Append(ctx, agg, version, r.CommandID, ev)
		return err
	})
	if err != nil {
		return wire.Acked{}, err
	}
	if len(out.Acknowledged) == 0 {
		return out, nil // every one it names was acknowledged before
	}
	h.Log.Info("foreign messages acknowledged", "count", len(out.Acknowledged), "first", out.Acknowledged[0], "seq", out.Seq)
	return out, h.Landed(ctx, out.Seq, ev)
}

// checkAck refuses a request that names nothing, or more than one way.
func checkAck(r wire.AckRequest) error {
	ranged := r.From != 0 || r.To != 0
	ways := 0
	for _, given := range []bool{len(r.Seqs) > 0, r.All, ranged} {
		if given {
			ways++
		}
	}
	switch {
	case ways == 0:
		return aggregates.Refuse("acknowledge", "foreign messages", aggregates.ErrInvalid, "name them by sequence, by --from and --to, or --all; see mesh foreign list")
	case ways > 1:
		return aggregates.Refuse("acknowledge", "foreign messages", aggregates.ErrInvalid, "give sequences, a range (--from and --to) or --all, only one of them")
	case ranged && (r.From == 0 || r.To == 0):
		return aggregates.Refuse("acknowledge", "foreign messages", aggregates.ErrInvalid, "a range needs both --from and --to")
	case ranged && r.From > r.To:
		return aggregates.Refuse("acknowledge", fmt.Sprintf("foreign messages from %d to %d", r.From, r.To), aggregates.ErrInvalid, "--from must not be after --to")
	}
	return nil
}

// decideAck reads what r acknowledges: the event to append, or nothing
// (out.Acknowledged empty) when every one it names was acknowledged before.
func (h *Service) decideAck(r wire.AckRequest) (wire.Acked, events.ForeignAcknowledged, error) {
	out := wire.Acked{Acknowledged: []uint64{}, Already: []uint64{}}
	var ev events.ForeignAcknowledged
	err := h.Proj.Read(func(v *projections.View) error {
		all, err := v.Foreign()
		if err != nil {
			return err
		}
		floods, err := v.Floods()
		if err != nil {
			return err
		}
		acked := map[uint64]uint64{}
		for _, f := range all {
			acked[f.Seq] = f.Acked
		}
		for _, f := range floods {
			acked[f.Seq] = f.Acked
		}
		if len(r.Seqs) > 0 {
			for _, seq := range r.Seqs {
				a, found := acked[seq]
				switch {
				case !found:
					return aggregates.Refuse("acknowledge", fmt.Sprintf("event %d", seq), aggregates.ErrUnknown, "it is not a foreign message; mesh foreign list names them")
				case a != 0:
					out.Already = append(out.Already, seq)
				case !slices.Contains(out.Acknowledged, seq):
					out.Acknowledged = append(out.Acknowledged, seq)
				}
			}
			ev.Seqs = out.Acknowledged
			return nil
		}
		from, to := r.From, r.To
		if r.All {
			from, to = 1, math.MaxUint64-1
		}
		for _, seq := range slices.Sorted(maps.Keys(acked)) {
			switch {
			case seq < from || seq > to:
			case acked[seq] != 0:
				out.Already = append(out.Already, seq)
			default:
				out.Acknowledged = append(out.Acknowledged, seq)
			}
		}
		if !r.All && len(out.Acknowledged)+len(out.Already) == 0 {
			return aggregates.Refuse("acknowledge", fmt.Sprintf("events %d to %d", from, to), aggregates.ErrUnknown, "no foreign message is between them; mesh foreign list names them")
		}
		if len(out.Acknowledged) > 0 {
			// The range as far as it holds open ones: what the fold marks.
			ev.From, ev.To = out.Acknowledged[0], out.Acknowledged[len(out.Acknowledged)-1]
		}
		return nil
	})
	return out, ev, err
}
