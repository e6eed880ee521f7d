package commands

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/meshctl/mesh/aggregates"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/events/store"
	"github.com/meshctl/mesh/projections"
)

// ForeignList is `mesh foreign list --json`: every foreign message (rule
// 19), acknowledged or not, by stream sequence.
type ForeignList struct {
	Foreign []projections.ForeignMessage `json:"foreign"`
	Open    int                          `json:"open"`
}

// AckRequest acknowledges foreign messages by stream sequence.
type AckRequest struct {
	CommandID string   `json:"command_id"`
	Seqs      []uint64 `json:"seqs"`
}

// Acked says what an acknowledgement did: the messages it acknowledged, and
// those acknowledged before (nothing to do for them).
type Acked struct {
	Seq          uint64   `json:"seq"`
	Acknowledged []uint64 `json:"acknowledged"`
	Already      []uint64 `json:"already"`
}

// ListForeign lists the foreign messages.
func (h *Handlers) ListForeign(_ context.Context, _ Empty) (ForeignList, error) {
	out := ForeignList{Foreign: []projections.ForeignMessage{}}
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
// a foreign message is refused whole, and nothing is recorded.
func (h *Handlers) AckForeign(ctx context.Context, r AckRequest) (Acked, error) {
	if err := h.writable(); err != nil {
		return Acked{}, err
	}
	if len(r.Seqs) == 0 {
		return Acked{}, aggregates.Refuse("acknowledge", "foreign messages", aggregates.ErrInvalid, "name at least one by its sequence; see mesh foreign list")
	}
	for range maxAttempts {
		out := Acked{Acknowledged: []uint64{}, Already: []uint64{}}
		err := h.Proj.Read(func(v *projections.View) error {
			all, err := v.Foreign()
			if err != nil {
				return err
			}
			for _, seq := range r.Seqs {
				i := slices.IndexFunc(all, func(f projections.ForeignMessage) bool { return f.Seq == seq })
				switch {
				case i < 0:
					return aggregates.Refuse("acknowledge", fmt.Sprintf("event %d", seq), aggregates.ErrInvalid, "it is not a foreign message; mesh foreign list names them")
				case all[i].Acked != 0:
					out.Already = append(out.Already, seq)
				case !slices.Contains(out.Acknowledged, seq):
					out.Acknowledged = append(out.Acknowledged, seq)
				}
			}
			return nil
		})
		if err != nil || len(out.Acknowledged) == 0 {
			return out, err
		}
		agg := events.ForeignAggregate()
		version, err := h.Store.Version(ctx, agg)
		if err != nil {
			return out, err
		}
		ev := events.ForeignAcknowledged{Seqs: out.Acknowledged}
		out.Seq, err = h.Store.Append(ctx, agg, version, r.CommandID, ev)
		if errors.Is(err, store.ErrConflict) {
			if err := h.catchUp(ctx); err != nil {
				return Acked{}, err
			}
			continue
		}
		if err != nil {
			return Acked{}, err
		}
		h.Log.Info("foreign messages acknowledged", "seqs", out.Acknowledged, "seq", out.Seq)
		return out, h.landed(ctx, out.Seq, ev)
	}
	return Acked{}, fmt.Errorf("cannot acknowledge: the acknowledgements changed under %d attempts in a row; try again", maxAttempts)
}
