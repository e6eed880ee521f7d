package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/meshctl/mesh/commands"
)

// StatusCmd tells whether the mesh is well, and if not, where.
type StatusCmd struct {
	JSON bool   `help:"Print {well, nodes, standings} as JSON."`
	AsOf string `help:"Answer as the mesh was then: RFC 3339, or a duration ago such as 2h."`
}

// Run prints a line per node, every standing, and the verdict. Exit 0 when
// well, 1 when not, 2 when status itself could not be answered.
func (c *StatusCmd) Run(ctx context.Context, g *Globals, out *Output) error {
	req := commands.StatusRequest{Brief: !c.JSON}
	var err error
	if req.AsOf, err = parseWhen("--as-of", c.AsOf); err != nil {
		return err
	}
	var s commands.StatusReport
	if err := g.call(ctx, commands.SubjectStatus, req, &s); err != nil {
		return exitError{code: 2, err: err}
	}
	if s.Table != nil {
		s.Nodes, s.Table = s.Table.Rows(), nil
	}
	if c.JSON {
		if err := printJSON(out.Out, s); err != nil {
			return exitError{code: 2, err: err}
		}
	} else {
		printStatus(out.Out, s)
	}
	if !s.Well {
		return exitError{code: 1}
	}
	return nil
}

func printStatus(out io.Writer, s commands.StatusReport) {
	// Buffered, and padded by widths measured once: a tabwriter holding a
	// hundred thousand rows, writing cell by cell, cost more than the answer.
	w := bufio.NewWriterSize(out, 64<<10)
	defer w.Flush()
	if s.AsOf != nil {
		fmt.Fprintf(w, "THE PAST: the mesh as of %s (the log folded up to event %d), not as it is now\n", s.AsOf.UTC().Format(time.RFC3339), s.Checkpoint)
	}
	wName, wSeq, wState := len("NODE"), len("SEQUENCE"), len("STATE")
	for _, n := range s.Nodes {
		wName, wState = max(wName, len(n.Name)), max(wState, len(n.State))
		wSeq = max(wSeq, len(strconv.FormatUint(n.Sequence, 10)))
	}
	row := func(name, seq, state, since, detail string) {
		line := fmt.Sprintf("%-*s  %-*s  %-*s  %-20s  %s", wName, name, wSeq, seq, wState, state, since, detail)
		fmt.Fprintln(w, strings.TrimRight(line, " "))
	}
	row("NODE", "SEQUENCE", "STATE", "SINCE", "DETAIL")
	behind := 0
	for _, n := range s.Nodes {
		if n.State != commands.StateCurrent {
			behind++
		}
		row(n.Name, strconv.FormatUint(n.Sequence, 10), n.State, n.Since.UTC().Format(time.RFC3339), n.Detail)
	}
	for _, st := range s.Standings {
		fmt.Fprintf(w, "%s on %s failing %s since %s: %s\n", st.Provider, st.Machine, st.Consumer, st.Since.UTC().Format("2006-01-02 15:04"), st.Word)
	}
	for _, c := range s.Causes {
		fmt.Fprintf(w, "not well: %s\n", c)
	}
	switch {
	case !s.Well && behind == 0 && len(s.Standings) == 0:
		fmt.Fprintf(w, "not well: %d node(s) current, nothing failing, but for the above\n", len(s.Nodes))
	case s.Well && len(s.Nodes) == 0:
		fmt.Fprintln(w, "well: no active nodes, and nothing is failing")
	case s.Well:
		fmt.Fprintf(w, "well: all %d node(s) current, nothing failing\n", len(s.Nodes))
	default:
		fmt.Fprintf(w, "not well: %d of %d node(s) not current, %d provider(s) failing a consumer\n", behind, len(s.Nodes), len(s.Standings))
	}
}

// ReportCmd records a provider's standing toward a consumer.
type ReportCmd struct {
	Failing   ReportFailingCmd   `cmd:"" help:"A provider keeps failing a consumer, in its own word."`
	Recovered ReportRecoveredCmd `cmd:"" help:"The provider serves the consumer again."`
}

type standingFlags struct {
	Provider string `required:"" help:"The provider module."`
	Machine  string `required:"" help:"The node the provider runs on."`
	Consumer string `required:"" help:"The consumer module it fails."`
}

type ReportFailingCmd struct {
	standingFlags
	Word string `required:"" help:"What fails, in the provider's word: it is shown until it recovers."`
}

func (c *ReportFailingCmd) Help() string {
	return `Example:
  mesh report failing --provider idp --machine auth-1 --consumer app --word "token endpoint 503"

A provider can publish the same event itself, on mesh.rp.<machine>.ProviderFailing (and
mesh.rp.<machine>.ProviderRecovered), as a mesh event envelope: see ARCHITECTURE.md. On mesh up's
closed bus it connects as that machine, with the node key in its join string.`
}

func (c *ReportFailingCmd) Run(ctx context.Context, g *Globals, out *Output) error {
	var r commands.Reported
	req := commands.ReportRequest{CommandID: commands.NewCommandID(), Failing: true, Provider: c.Provider, Machine: c.Machine, Consumer: c.Consumer, Word: c.Word}
	if err := g.call(ctx, commands.SubjectReport, req, &r); err != nil {
		return err
	}
	fmt.Fprintf(out.Out, "recorded: %s on %s failing %s: %s (sequence %d)\n", c.Provider, c.Machine, c.Consumer, c.Word, r.Seq)
	return nil
}

type ReportRecoveredCmd struct {
	standingFlags
}

func (c *ReportRecoveredCmd) Run(ctx context.Context, g *Globals, out *Output) error {
	var r commands.Reported
	req := commands.ReportRequest{CommandID: commands.NewCommandID(), Provider: c.Provider, Machine: c.Machine, Consumer: c.Consumer}
	if err := g.call(ctx, commands.SubjectReport, req, &r); err != nil {
		return err
	}
	if !r.Changed {
		fmt.Fprintf(out.Out, "%s on %s was not failing %s; nothing to do\n", c.Provider, c.Machine, c.Consumer)
		return nil
	}
	fmt.Fprintf(out.Out, "recorded: %s on %s serves %s again (sequence %d)\n", c.Provider, c.Machine, c.Consumer, r.Seq)
	return nil
}
