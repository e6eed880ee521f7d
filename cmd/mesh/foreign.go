package main

import (
	"context"
	"fmt"
	"strconv"
	"text/tabwriter"

	"github.com/meshctl/mesh/cmd/mesh/cmdline"
	"github.com/meshctl/mesh/cmd/mesh/text"
	"github.com/meshctl/mesh/wire"
)

// ForeignCmd lists and acknowledges foreign messages (rule 19).
type ForeignCmd struct {
	List ForeignListCmd `cmd:"" help:"Every foreign message: where it arrived, who it names as its writer, and why it was set aside."`
	Ack  ForeignAckCmd  `cmd:"" help:"Acknowledge foreign messages by stream sequence, once seen (recorded as an event)."`
}

type ForeignListCmd struct {
	JSON bool `help:"Print {foreign, open} as JSON."`
}

func (c *ForeignListCmd) Run(ctx context.Context, g *cmdline.Globals, out *cmdline.Output) error {
	var l wire.ForeignList
	if err := g.Call(ctx, wire.SubjectForeignList, wire.Empty{}, &l); err != nil {
		return err
	}
	if c.JSON {
		return text.JSON(out.Out, l)
	}
	text.Showable(&l)
	if len(l.Foreign) == 0 {
		fmt.Fprintln(out.Out, "no foreign messages: every message on the stream is its rightful writer's")
		return nil
	}
	tw := tabwriter.NewWriter(out.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SEQ\tSTORED\tSUBJECT\tWRITER\tACKNOWLEDGED\tWHY")
	for _, f := range l.Foreign {
		ack := "no"
		if f.Acked != 0 {
			ack = fmt.Sprintf("at event %d", f.Acked)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", f.Seq, text.Time(f.Stored), f.Subject, text.OrNone(f.Writer), ack, f.Reason)
	}
	tw.Flush()
	fmt.Fprintf(out.Out, "%d foreign message(s), %d not acknowledged\n", len(l.Foreign), l.Open)
	return nil
}

type ForeignAckCmd struct {
	Seqs []string `arg:"" optional:"" name:"seq" help:"Stream sequences of foreign messages or floods (mesh foreign list, mesh status)."`
	All  bool     `help:"Acknowledge every foreign message and flood not acknowledged yet, as one event."`
	From uint64   `help:"With --to: acknowledge every one from this stream sequence on, as one event." placeholder:"SEQ"`
	To   uint64   `help:"With --from: up to this stream sequence, included." placeholder:"SEQ"`
	JSON bool     `help:"Print the answer as JSON (acknowledged, already, seq)."`
}

// listAtMost is how many sequences an acknowledgement names in its
// sentence; past it, the count and the first and last.
const listAtMost = 10

func (c *ForeignAckCmd) Run(ctx context.Context, g *cmdline.Globals, out *cmdline.Output) error {
	req := wire.AckRequest{CommandID: wire.NewCommandID(), All: c.All, From: c.From, To: c.To}
	for _, s := range c.Seqs {
		seq, err := strconv.ParseUint(s, 10, 64)
		if err != nil || seq == 0 {
			return cmdline.Usagef("%q is not a stream sequence: give the SEQ column of mesh foreign list", s)
		}
		req.Seqs = append(req.Seqs, seq)
	}
	var a wire.Acked
	if err := g.Call(ctx, wire.SubjectForeignAck, req, &a); err != nil {
		return err
	}
	if c.JSON {
		return text.JSON(out.Out, a)
	}
	if len(a.Acknowledged) > 0 {
		fmt.Fprintf(out.Out, "acknowledged %d foreign message(s) %s (recorded at event %d); audit still lists them\n", len(a.Acknowledged), seqList(a.Acknowledged), a.Seq)
	}
	switch {
	case len(a.Already) > 0 && len(c.Seqs) > 0:
		fmt.Fprintf(out.Out, "already acknowledged, nothing to do: %s\n", seqList(a.Already))
	case len(a.Acknowledged) == 0 && len(a.Already) > 0:
		fmt.Fprintf(out.Out, "nothing to do: the %d foreign message(s) there were acknowledged already\n", len(a.Already))
	case len(a.Acknowledged) == 0:
		fmt.Fprintln(out.Out, "nothing to do: no foreign message is left to acknowledge")
	}
	return nil
}

// seqList names sequences: all of them when few, else how many and the
// first and last.
func seqList(seqs []uint64) string {
	if len(seqs) <= listAtMost {
		return fmt.Sprint(seqs)
	}
	return fmt.Sprintf("from event %d to %d", seqs[0], seqs[len(seqs)-1])
}
