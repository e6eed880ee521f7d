package main

import (
	"bufio"
	"context"
	"fmt"
	"time"

	"github.com/meshctl/mesh/cmd/mesh/cmdline"
	"github.com/meshctl/mesh/cmd/mesh/text"
	"github.com/meshctl/mesh/wire"
)

// SeatCmd groups the seats' verbs (issue 18).
type SeatCmd struct {
	List     SeatListCmd     `cmd:"" help:"Every seat, its holder, and a handover under way."`
	Show     SeatShowCmd     `cmd:"" help:"One seat: its holder, what a handover waits for, and its steps in the log."`
	Handover SeatHandoverCmd `cmd:"" help:"Move a seat to another node: the holder lets it go before the new one takes it."`
}

type SeatListCmd struct {
	JSON bool `help:"Print {seats} as JSON."`
}

func (c *SeatListCmd) Help() string { return "Examples:\n  mesh seat list" }

func (c *SeatListCmd) Run(ctx context.Context, g *cmdline.Globals, out *cmdline.Output) error {
	var r wire.SeatList
	if err := g.Call(ctx, wire.SubjectSeatList, wire.Empty{}, &r); err != nil {
		return err
	}
	if c.JSON {
		return text.JSON(out.Out, r)
	}
	text.Showable(&r)
	if len(r.Seats) == 0 {
		fmt.Fprintln(out.Out, `no seats yet; a module claims one with "claims": ["NAME"] in its manifest`)
	}
	for _, s := range r.Seats {
		fmt.Fprintln(out.Out, seatLine(s))
	}
	return nil
}

// seatLine says a seat in one line.
func seatLine(s wire.SeatView) string {
	switch {
	case s.HandoverTo != "":
		return fmt.Sprintf("%s  held by %s on %s, being handed over to %s: %s", s.Seat.Seat, s.Module, s.Node, s.HandoverTo, s.Waiting)
	case s.Node != "":
		return fmt.Sprintf("%s  held by %s on %s since %s", s.Seat.Seat, s.Module, s.Node, text.Time(s.Since))
	}
	return fmt.Sprintf("%s  free since %s (%s): its work queue keeps what is asked of it", s.Seat.Seat, text.Time(s.Since), s.Why)
}

type SeatShowCmd struct {
	Seat string `arg:""`
	JSON bool   `help:"Print the seat as JSON."`
}

func (c *SeatShowCmd) Help() string { return "Examples:\n  mesh seat show builder" }

func (c *SeatShowCmd) Run(ctx context.Context, g *cmdline.Globals, out *cmdline.Output) error {
	var r wire.SeatView
	if err := g.Call(ctx, wire.SubjectSeatShow, wire.NameRequest{Name: c.Seat}, &r); err != nil {
		return err
	}
	if c.JSON {
		return text.JSON(out.Out, r)
	}
	text.Showable(&r)
	w := bufio.NewWriter(out.Out)
	defer w.Flush()
	fmt.Fprintln(w, seatLine(r))
	for _, st := range r.Steps {
		fmt.Fprintf(w, "  %s  event %d  %s\n", text.Time(st.At), st.Seq, st.What)
	}
	return nil
}

type SeatHandoverCmd struct {
	Seat  string        `arg:""`
	To    string        `required:"" predictor:"node" help:"The node that is to hold the seat."`
	Wait  time.Duration `help:"Wait this long for the handover to finish; exit 1 if it has not, saying what it waits for."`
	Force bool          `help:"Do not wait for the holder to let the seat go: its machine is lost."`
	JSON  bool          `help:"Print the seat as it stands after the handover (and its --wait) as JSON: node, handover_to, handover_seq, waiting, steps."`
}

func (c *SeatHandoverCmd) Help() string {
	return "Examples:\n  mesh seat handover builder --to build-2 --wait 1m\n  mesh seat handover builder --to build-2 --force   (build-1 is lost)\n\n" +
		"The holder is sent a declaration without the claiming module; only once it reports applying it\n" +
		"does the new node take the seat, its consumers sent together with it. At no moment do two hold it."
}

func (c *SeatHandoverCmd) Run(ctx context.Context, g *cmdline.Globals, out *cmdline.Output) error {
	var r wire.SeatView
	req := wire.HandoverRequest{CommandID: wire.NewCommandID(), Seat: c.Seat, To: c.To, Force: c.Force}
	if err := g.Call(ctx, wire.SubjectSeatHandover, req, &r); err != nil {
		return err
	}
	deadline := time.Now().Add(c.Wait)
	for r.HandoverTo != "" && time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
		var now wire.SeatView // fresh: a field the answer leaves out is empty, not the last one's
		if err := g.Call(ctx, wire.SubjectSeatShow, wire.NameRequest{Name: c.Seat}, &now); err != nil {
			return err
		}
		r = now
	}
	done := r.Node == c.To && r.HandoverTo == ""
	if c.JSON {
		// The seat as it stands: a script reads whether it moved (node,
		// handover_to) and the event that started it (handover_seq); a
		// wait that ended first still exits 1, named on stderr.
		r.Steps = cmdline.NonNil(r.Steps)
		if err := text.JSON(out.Out, r); err != nil {
			return err
		}
		if !done && c.Wait > 0 {
			return cmdline.ExitError{Code: 1, Err: fmt.Errorf("seat %s is not handed over to %s after %s: %s", c.Seat, c.To, c.Wait, r.Waiting)}
		}
		return nil
	}
	switch {
	case done:
		fmt.Fprintf(out.Out, "%s is held by %s on %s\n", c.Seat, r.Module, r.Node)
	case c.Wait > 0:
		return cmdline.ExitError{Code: 1, Err: fmt.Errorf("seat %s is not handed over to %s after %s: %s", c.Seat, c.To, c.Wait, r.Waiting)}
	default:
		fmt.Fprintf(out.Out, "handing %s over from %s to %s: %s (mesh seat show %s follows it)\n", c.Seat, r.Node, r.HandoverTo, r.Waiting, c.Seat)
	}
	return nil
}
