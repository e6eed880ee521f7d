package status

import (
	"context"
	"errors"
	"strings"

	"github.com/meshctl/mesh/aggregates"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/events/store"
	"github.com/meshctl/mesh/projections"
	"github.com/meshctl/mesh/wire"
)

// Report records a provider's standing toward a consumer. Failing replaces
// the triple's word; recovered ends it, and with nothing failing is said as
// such and appends nothing. The event goes under the machine's reports
// prefix, where a provider on that machine may publish it itself.
func (h *Service) Report(ctx context.Context, r wire.ReportRequest) (wire.Reported, error) {
	if err := h.ActiveNode(ctx, "report on", r.Machine); err != nil {
		return wire.Reported{}, err
	}
	var failing bool
	err := h.Proj.Read(func(v *projections.View) error {
		for _, m := range []string{r.Provider, r.Consumer} {
			if _, found, err := v.Module(m); err != nil || !found {
				if err != nil {
					return err
				}
				return aggregates.Refuse("report on", m, aggregates.ErrUnknownModule, "no module of that name is registered; see mesh module list")
			}
		}
		// The fold takes a standing only of a provider on its machine
		// toward a consumer resolved to it: the operator's word is held
		// to that too, and refused here rather than set aside there.
		if r.Failing {
			why, err := v.StandingHolds(r.Provider, r.Machine, r.Consumer, false)
			if err != nil {
				return err
			}
			var fe *events.ForeignError
			if errors.As(why, &fe) {
				return aggregates.Refuse("report on", r.Provider, aggregates.ErrUnknownModule,
					fe.Reason+"; a standing is a provider's on its machine toward a consumer of it (see mesh plan NODE)")
			}
		}
		standings, err := v.Standings()
		for _, s := range standings {
			if s.Provider == r.Provider && s.Machine == r.Machine && s.Consumer == r.Consumer {
				failing = true
			}
		}
		return err
	})
	if err != nil {
		return wire.Reported{}, err
	}
	var ev events.Event = events.ProviderRecovered{Provider: r.Provider, Machine: r.Machine, Consumer: r.Consumer}
	if r.Failing {
		word := strings.TrimSpace(r.Word)
		if word == "" {
			return wire.Reported{}, aggregates.Refuse("report", "failing", aggregates.ErrInvalid, "a failing report needs --word saying what fails")
		}
		ev = events.ProviderFailing{Provider: r.Provider, Machine: r.Machine, Consumer: r.Consumer, Word: word}
	} else if !failing {
		return wire.Reported{}, nil
	}
	if err := h.Writable(); err != nil {
		return wire.Reported{}, err
	}
	seq, err := h.Store.Report(ctx, r.Machine, r.CommandID, ev, store.Sealing{Signer: h.Signer, MAC: h.Keys.LogMAC()})
	if err != nil {
		return wire.Reported{}, err
	}
	h.Log.Info("standing", "type", ev.EventType(), "provider", r.Provider, "machine", r.Machine, "consumer", r.Consumer)
	return wire.Reported{Changed: true, Seq: seq}, h.Landed(ctx, seq, ev)
}
