package seats

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/meshctl/mesh/aggregates"
	"github.com/meshctl/mesh/commands/core"
	"github.com/meshctl/mesh/commands/world"
	"github.com/meshctl/mesh/compose"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/events/store"
	"github.com/meshctl/mesh/projections"
	"github.com/meshctl/mesh/secret"
	"github.com/meshctl/mesh/wire"
	"github.com/nats-io/nats.go/jetstream"
)

// Seats (issue 18, rule 24): a manifest's claims are roles one module
// instance holds mesh-wide. The seat aggregate's version is expected in
// the same atomic batch as the assignment that gives or takes the
// claiming module, so two holders are never recorded; a handover releases
// before it acquires, each step an event, driven by every controller's
// timer like a rollout.

// ListSeats answers every seat, with where a handover stands.
func (h *Service) ListSeats(ctx context.Context, _ wire.Empty) (wire.SeatList, error) {
	out := wire.SeatList{Seats: []wire.SeatView{}}
	composed, err := h.world.ComposeAll()
	if err != nil {
		return out, err
	}
	err = h.Proj.Read(func(v *projections.View) error {
		rows, err := v.Seats()
		for _, row := range rows {
			out.Seats = append(out.Seats, wire.SeatView{Seat: row, Waiting: WaitsFor(v, row, composed.Of(row.Node)), Steps: []wire.SeatStep{}})
		}
		return err
	})
	return out, err
}

// ShowSeat answers one seat and its steps in the log.
func (h *Service) ShowSeat(ctx context.Context, r wire.NameRequest) (wire.SeatView, error) {
	var out wire.SeatView
	var found bool
	composed, err := h.world.ComposeAll()
	if err != nil {
		return out, err
	}
	if err := h.Proj.Read(func(v *projections.View) (err error) {
		out.Seat, found, err = v.Seat(r.Name)
		out.Waiting = WaitsFor(v, out.Seat, composed.Of(out.Seat.Node))
		return err
	}); err != nil {
		return wire.SeatView{}, err
	}
	if !found {
		return wire.SeatView{}, aggregates.Refuse("show seat", r.Name, aggregates.ErrUnknownNode, "no module ever held a seat of that name; mesh seat list names those that exist")
	}
	out.Steps = []wire.SeatStep{}
	err = h.Store.Read(ctx, store.ReadOptions{Filter: events.SeatAggregate(r.Name).Filter()}, func(m store.Msg) error {
		env, ev, err := events.Decode(m.Data)
		if err != nil {
			return nil // the fold names a message it cannot read; this lists the seat's steps
		}
		out.Steps = append(out.Steps, wire.SeatStep{Seq: m.Seq, At: env.OccurredAt, Type: env.Type, What: seatStep(ev)})
		return nil
	})
	return out, err
}

// seatStep says one seat event in a sentence.
func seatStep(ev events.Event) string {
	switch e := ev.(type) {
	case events.SeatTaken:
		return fmt.Sprintf("%s on %s took it", e.Module, e.Node)
	case events.SeatHandoverStarted:
		if e.Force {
			return fmt.Sprintf("handover of %s from %s to %s, forced: %s is not waited for", e.Module, e.From, e.To, e.From)
		}
		return fmt.Sprintf("handover of %s from %s to %s started: %s is sent a declaration without it", e.Module, e.From, e.To, e.From)
	case events.SeatHandedOver:
		how := e.From + " applied its declaration without it"
		if e.Forced {
			how = "forced: " + e.From + " was not waited for"
		}
		return fmt.Sprintf("%s handed over from %s to %s (%s)", e.Module, e.From, e.To, how)
	case events.SeatReleased:
		return fmt.Sprintf("%s on %s let it go: %s", e.Module, e.Node, e.Why)
	}
	return ev.EventType()
}

// WaitsFor says what a seat's handover under way waits for, from v ("" when
// none is under way).
// holder is what the holder would be sent now (with the seat let go).
func WaitsFor(v *projections.View, s projections.Seat, holder world.Would) string {
	if s.HandoverTo == "" {
		return ""
	}
	row, found, err := v.Node(s.Node)
	unsent := !found || row.LastSent == nil || row.LastSent.StreamSeq < s.HandoverSeq
	switch {
	case err != nil:
		return err.Error()
	case s.Force:
		return fmt.Sprintf("forced: %s is handed the seat at the next step", s.HandoverTo)
	case unsent && found && !row.Retired && !holder.Composable:
		// Nothing but the operator ends this wait (cannotLetGo).
		return fmt.Sprintf("%s; the way out: mesh seat handover %s --to %s --force", holderStuck(s, holder.Reason), s.Seat, s.HandoverTo)
	case unsent:
		return fmt.Sprintf("%s is to be sent a declaration without %s", s.Node, s.Module)
	case row.LastReport == nil || row.LastReport.Digest != row.LastSent.Digest:
		return fmt.Sprintf("%s has not reported applying its declaration without %s (sequence %d, sent %s); if its machine is lost: mesh seat handover %s --to %s --force",
			s.Node, s.Module, row.LastSent.Sequence, row.LastSent.At.UTC().Format(time.RFC3339), s.Seat, s.HandoverTo)
	case row.LastReport.Outcome != events.OutcomeApplied:
		return fmt.Sprintf("%s %s its declaration without %s: %s; mend it, or if its machine is lost: mesh seat handover %s --to %s --force",
			s.Node, row.LastReport.Outcome, s.Module, row.LastReport.Reason, s.Seat, s.HandoverTo)
	}
	return fmt.Sprintf("%s applied its declaration without %s: %s is handed the seat at the next step", s.Node, s.Module, s.HandoverTo)
}

// cannotLetGo says why the seat's holder cannot be composed without it
// ("" when it can): a holder that also consumes the seat's own service
// receives it from nobody once the seat is let go, so the declaration a
// handover waits for it to apply could never be sent (rule 24: release
// before acquire). The way out is the operator's, --force: the new holder
// then takes the seat without waiting, and the old one is sent its
// declaration receiving from it in the same act as the consumers.
func (h *Service) cannotLetGo(v *projections.View, s projections.Seat, to string) (string, error) {
	row, found, err := v.Node(s.Node)
	if err != nil || !found || row.Retired {
		return "", err // a lost holder is not waited for (handoverStep)
	}
	in, err := h.world.Input(v)
	if err != nil {
		return "", err
	}
	if in.Releasing == nil {
		in.Releasing = map[string]string{}
	}
	in.Releasing[s.Node+"/"+s.Module] = world.Releasing(s.Module, s.Seat, to)
	if res := compose.NewWorld(in).Compose(s.Node); !res.Composable() {
		return holderStuck(s, res.Reason()), nil
	}
	return "", nil
}

// holderStuck is why a seat's holder cannot be sent its declaration
// without the seat.
func holderStuck(s projections.Seat, reason string) string {
	return fmt.Sprintf("%s cannot be composed without %s (%s), so it can never be sent the declaration that lets the seat go", s.Node, s.Module, reason)
}

// HandoverSeat starts moving a seat to a node: its steps are the
// controllers' drive's to take (DriveSeats), and seat show says where it
// stands.
func (h *Service) HandoverSeat(ctx context.Context, r wire.HandoverRequest) (wire.SeatView, error) {
	if err := h.ActiveNode(ctx, "hand over seat "+r.Seat+" to", r.To); err != nil {
		return wire.SeatView{}, err
	}
	_, _, err := h.DecideAtomic(ctx, "hand over seat "+r.Seat+" to", r.To, r.CommandID, func(v *projections.View) ([]store.One, error) {
		row, found, err := v.Seat(r.Seat)
		if err != nil {
			return nil, err
		}
		if !found {
			return nil, aggregates.Refuse("hand over seat", r.Seat, aggregates.ErrUnknownNode, "no module ever held a seat of that name; mesh seat list names those that exist")
		}
		s, err := core.SeatOf(v, r.Seat)
		if err != nil {
			return nil, err
		}
		evs, err := s.Handover(r.To, r.Force)
		if err != nil || len(evs) == 0 {
			return nil, err
		}
		if as, err := v.AssignmentsOf(r.To); err != nil {
			return nil, err
		} else if slices.ContainsFunc(as, func(a projections.AssignmentRow) bool { return a.Module == row.Module }) {
			return nil, aggregates.Refuse("hand over seat", r.Seat, aggregates.ErrInvalid, fmt.Sprintf("%s is assigned %s already without holding the seat; unassign it there first", r.To, row.Module))
		}
		if !r.Force {
			if why, err := h.cannotLetGo(v, row, r.To); err != nil {
				return nil, err
			} else if why != "" {
				return nil, aggregates.Refuse("hand over seat", r.Seat, aggregates.ErrInvalid, why+"; give --force to hand it to "+r.To+" without waiting for "+row.Node)
			}
		}
		return []store.One{{Aggregate: events.SeatAggregate(r.Seat), Expected: s.Version, Event: evs[0]}}, nil
	})
	if err != nil {
		return wire.SeatView{}, err
	}
	// The first step now, rather than at the next tick.
	if err := h.DriveSeats(ctx); err != nil {
		return wire.SeatView{}, err
	}
	return h.ShowSeat(ctx, wire.NameRequest{Name: r.Seat})
}

// DriveSeats takes the next step of every handover under way: sends the
// holder its declaration without the seat; once it applied that (or the
// operator forced it), moves the claiming module and the seat to the new
// holder in one atomic batch; then sends the new holder and the nodes that
// receive from its module their declarations in one more. Every step is
// safe to take twice, by this controller or another: each expects the
// versions it read.
func (h *Service) DriveSeats(ctx context.Context) error {
	if h.Writable() != nil || h.Past {
		return nil
	}
	var seats []projections.Seat
	if err := h.Proj.Read(func(v *projections.View) (err error) { seats, err = v.Seats(); return err }); err != nil {
		return err
	}
	for _, s := range seats {
		var err error
		switch {
		case s.HandoverTo != "":
			err = h.handoverStep(ctx, s)
		case s.TakenSeq != 0 && s.Node != "":
			err = h.sendNewHolder(ctx, s)
		}
		if err != nil && !errors.Is(err, store.ErrConflict) {
			return fmt.Errorf("seat %s: %w", s.Seat, err)
		}
	}
	return nil
}

// handoverStep sends the holder its declaration without the seat, or,
// once it applied it, hands the seat over.
func (h *Service) handoverStep(ctx context.Context, s projections.Seat) error {
	row, found, err := h.Proj.Node(s.Node)
	if err != nil {
		return err
	}
	if !s.Force && found && !row.Retired {
		switch {
		case row.LastSent == nil || row.LastSent.StreamSeq < s.HandoverSeq:
			_, err := h.push.Push(ctx, wire.PushRequest{CommandID: wire.NewCommandID(), Nodes: []string{s.Node}, By: "handover " + s.Seat, Once: true})
			return err
		case row.LastReport == nil || row.LastReport.Digest != row.LastSent.Digest || row.LastReport.Outcome != events.OutcomeApplied:
			return nil // waits for the holder: seat show says so
		}
	}
	_, _, err = h.DecideAtomic(ctx, "hand over seat", s.Seat, wire.NewCommandID(), func(v *projections.View) ([]store.One, error) {
		seat, err := core.SeatOf(v, s.Seat)
		if err != nil || seat.HandoverTo == "" || seat.Version != s.Version {
			return nil, err // taken meanwhile
		}
		from, err := core.NodeOf(v, s.Node)
		if err != nil {
			return nil, err
		}
		to, err := core.NodeOf(v, s.HandoverTo)
		if err != nil {
			return nil, err
		}
		have, ok := from.Assignments[s.Module]
		if !ok {
			return nil, fmt.Errorf("%s no longer holds %s", s.Node, s.Module)
		}
		m, found, err := h.world.Manifest(v, compose.BuildRef{Module: s.Module, Build: have.Build})
		if err != nil || !found {
			return nil, fmt.Errorf("build %s of %s cannot be read: %v", have.Build, s.Module, err)
		}
		// A secret setting is sealed to its node's place: opened for the
		// old holder, sealed again for the new one.
		settings := map[string]string{}
		for k, val := range have.Settings {
			if secret.IsSealed(val) {
				clear, err := h.Secrets.OpenSetting(ctx, s.Node, s.Module, k, val)
				if err != nil {
					return nil, fmt.Errorf("the secret setting %s of %s on %s cannot be opened to move it: %v", k, s.Module, s.Node, err)
				}
				if val, err = h.Secrets.SealSetting(ctx, s.HandoverTo, s.Module, k, clear, ""); err != nil {
					return nil, err
				}
			}
			settings[k] = val
		}
		off, err := from.Decide(aggregates.UnassignModule{Node: s.Node, Module: s.Module}, h.Now())
		if err != nil {
			return nil, err
		}
		on, err := to.Decide(aggregates.AssignModule{Node: s.HandoverTo, Module: s.Module, Build: have.Build, Spec: m.Settings, Settings: settings, Policy: have.Policy}, h.Now())
		if err != nil || len(off) == 0 || len(on) == 0 {
			return nil, cmp.Or(err, fmt.Errorf("%s cannot take %s from %s", s.HandoverTo, s.Module, s.Node))
		}
		return []store.One{
			{Aggregate: events.SeatAggregate(s.Seat), Expected: seat.Version,
				Event: events.SeatHandedOver{Seat: s.Seat, Module: s.Module, From: s.Node, To: s.HandoverTo, Forced: s.Force || !found || row.Retired}},
			{Aggregate: events.NodeAggregate(s.Node), Expected: from.Version, Event: off[0]},
			{Aggregate: events.NodeAggregate(s.HandoverTo), Expected: to.Version, Event: on[0]},
		}, nil
	})
	if err != nil {
		return err
	}
	h.Log.Info("seat handed over", "seat", s.Seat, "from", s.Node, "to", s.HandoverTo)
	s, _, err = h.seatRow(s.Seat)
	if err != nil || s.TakenSeq == 0 {
		return err
	}
	return h.sendNewHolder(ctx, s)
}

func (h *Service) seatRow(name string) (projections.Seat, bool, error) {
	var s projections.Seat
	var found bool
	err := h.Proj.Read(func(v *projections.View) (err error) { s, found, err = v.Seat(name); return err })
	return s, found, err
}

// sendNewHolder sends the seat's new holder and every node that receives
// from its module their declarations, in one atomic batch: the consumers
// move to the holder in the same act as the holder takes it. Nothing to
// do once the holder was sent a declaration since it took the seat.
func (h *Service) sendNewHolder(ctx context.Context, s projections.Seat) error {
	row, found, err := h.Proj.Node(s.Node)
	if err != nil || !found || row.LastSent != nil && row.LastSent.StreamSeq > s.TakenSeq {
		return err
	}
	composed, err := h.world.ComposeAll()
	if err != nil {
		return err
	}
	nodes := []string{s.Node}
	for n, w := range composed.All() {
		for _, r := range w.Receives {
			if r.Node == s.Node && r.Module == s.Module && n != s.Node && !slices.Contains(nodes, n) {
				nodes = append(nodes, n)
			}
		}
	}
	slices.Sort(nodes[1:])
	_, _, err = h.DecideAtomic(ctx, "send the new holder of seat", s.Seat, wire.NewCommandID(), func(v *projections.View) ([]store.One, error) {
		in, err := h.world.Input(v)
		if err != nil {
			return nil, err
		}
		w := compose.NewWorld(in)
		var items []store.One
		for _, n := range nodes {
			res := w.Compose(n)
			if !res.Composable() {
				h.Log.Warn("after a handover, a node cannot be composed", "seat", s.Seat, "node", n, "why", res.Reason())
				continue
			}
			r, _, err := v.Node(n)
			if err != nil {
				return nil, err
			}
			ev, _ := h.push.Seal(*res.Declaration, r, "handover "+s.Seat, h.Now())
			items = append(items, store.One{Aggregate: events.NodeAggregate(n), Expected: r.Version, Event: ev})
		}
		return items, nil
	})
	if err == nil {
		h.Log.Info("seat's new holder and its consumers sent", "seat", s.Seat, "holder", s.Node, "nodes", len(nodes))
	}
	return err
}

// AssertSeatQueue makes a seat's work queue if it is not there, with the
// stream's replicas, and says which. Work-queue retention: a message is
// kept until a holder takes and acknowledges it, whoever holds the seat
// by then, and is taken once.
func AssertSeatQueue(ctx context.Context, js jetstream.JetStream, replicas int, seat string) (string, error) {
	name := events.SeatStream(seat)
	if _, err := js.Stream(ctx, name); err == nil {
		return "found", nil
	} else if !errors.Is(err, jetstream.ErrStreamNotFound) {
		return "", fmt.Errorf("cannot assert the work queue %s of seat %s: %w", name, seat, err)
	}
	_, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Description: "the work asked of seat " + seat + ", kept until its holder takes it",
		Subjects: []string{events.SeatWork(seat)}, Retention: jetstream.WorkQueuePolicy, Storage: jetstream.FileStorage, Replicas: max(replicas, 1)})
	if err != nil {
		return "", fmt.Errorf("cannot create the work queue %s of seat %s: %w", name, seat, err)
	}
	return "created", nil
}
