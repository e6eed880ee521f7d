package main

import (
	"context"
	"fmt"
	"time"

	"github.com/meshctl/mesh/cmd/mesh/cmdline"
	"github.com/meshctl/mesh/cmd/mesh/text"
	"github.com/meshctl/mesh/wire"
)

// StatusCmd tells whether the mesh is well, and if not, where.
type StatusCmd struct {
	JSON     bool          `help:"Print {well, nodes, standings} as JSON."`
	AsOf     string        `help:"Answer as the mesh was then: RFC 3339, or a duration ago such as 2h."`
	Selector string        `help:"Only the nodes this selects (as push --selector); standings and causes stay the whole mesh's."`
	Watch    time.Duration `help:"Print status again every this long (such as 2s) until Ctrl-C, which ends it (exit 0)." placeholder:"EVERY"`
}

// Run prints a line per node, every standing, and the verdict. Exit 0 when
// well, 1 when not, 3 when status itself could not be answered (no bus, no
// controller): whether the mesh is well is then unknown, which a script
// must not read as "not understood" (2) nor as "not well" (1).
func (c *StatusCmd) Run(ctx context.Context, g *cmdline.Globals, out *cmdline.Output) error {
	if c.Watch == 0 {
		return c.once(ctx, g, out)
	}
	if c.Watch < 100*time.Millisecond || c.AsOf != "" {
		return cmdline.Usagef("--watch %s: give an interval of 100ms or more, and no --as-of (the past does not change)", c.Watch)
	}
	for {
		// With --json each answer is one line (JSON lines), which a script
		// reads one at a time; a separator line would not parse.
		if !c.JSON {
			fmt.Fprintf(out.Out, "--- %s\n", text.Time(time.Now()))
		}
		if err := c.once(ctx, g, out); ctx.Err() == nil && (cmdline.ExitFor(err) == cmdline.ExitUnknown || cmdline.ExitFor(err) == cmdline.ExitNotUnders) {
			return err // status itself cannot be answered: say so, not again and again
		}
		select {
		case <-ctx.Done():
			return nil // Ctrl-C ends a watch; it is not a failure
		case <-time.After(c.Watch):
		}
	}
}

func (c *StatusCmd) once(ctx context.Context, g *cmdline.Globals, out *cmdline.Output) error {
	req := wire.StatusRequest{Brief: !c.JSON, Selector: c.Selector, DetailsOnce: !c.JSON}
	var err error
	if req.AsOf, err = parseWhen("--as-of", c.AsOf); err != nil {
		return err
	}
	var s wire.StatusReport
	if err := g.Call(ctx, wire.SubjectStatus, req, &s); err != nil {
		if cmdline.ExitFor(err) == cmdline.ExitNotUnders {
			return err
		}
		return cmdline.ExitError{Code: cmdline.ExitUnknown, Err: err}
	}
	if c.JSON {
		if s.Table != nil {
			s.Nodes, s.Table = s.Table.Rows(), nil
		}
		write := text.JSON
		if c.Watch != 0 {
			write = text.JSONLine
		}
		if err := write(out.Out, s); err != nil {
			return cmdline.ExitError{Code: 2, Err: err}
		}
	} else {
		text.Showable(&s)
		text.Status(out.Out, s)
	}
	if !s.Well {
		return cmdline.ExitError{Code: 1}
	}
	return nil
}

// ReportCmd records a provider's standing toward a consumer.
type ReportCmd struct {
	Failing   ReportFailingCmd   `cmd:"" help:"A provider keeps failing a consumer, in its own word."`
	Recovered ReportRecoveredCmd `cmd:"" help:"The provider serves the consumer again."`
}

type standingFlags struct {
	Provider string `required:"" predictor:"module" help:"The provider module."`
	Machine  string `required:"" predictor:"node" help:"The node the provider runs on."`
	Consumer string `required:"" predictor:"module" help:"The consumer module it fails."`
	JSON     bool   `help:"Print {changed, seq} as JSON (changed: false when there was nothing to do)."`
}

type ReportFailingCmd struct {
	standingFlags
	Word string `required:"" help:"What fails, in the provider's word: it is shown until it recovers."`
}

func (c *ReportFailingCmd) Help() string {
	return `Examples:
  mesh report failing --provider idp --machine auth-1 --consumer app --word "token endpoint 503"

A provider can publish the same event itself, on mesh.rp.<machine>.ProviderFailing (and
mesh.rp.<machine>.ProviderRecovered), as a mesh event envelope: see ARCHITECTURE.md. On mesh up's
closed bus it connects as that machine, with the node key in its join string.`
}

func (c *ReportFailingCmd) Run(ctx context.Context, g *cmdline.Globals, out *cmdline.Output) error {
	var r wire.Reported
	req := wire.ReportRequest{CommandID: wire.NewCommandID(), Failing: true, Provider: c.Provider, Machine: c.Machine, Consumer: c.Consumer, Word: c.Word}
	if err := g.Call(ctx, wire.SubjectReport, req, &r); err != nil {
		return err
	}
	if c.JSON {
		return text.JSON(out.Out, r)
	}
	fmt.Fprintf(out.Out, "recorded: %s on %s failing %s: %s (sequence %d)\n", c.Provider, c.Machine, c.Consumer, c.Word, r.Seq)
	return nil
}

type ReportRecoveredCmd struct {
	standingFlags
}

func (c *ReportRecoveredCmd) Run(ctx context.Context, g *cmdline.Globals, out *cmdline.Output) error {
	var r wire.Reported
	req := wire.ReportRequest{CommandID: wire.NewCommandID(), Provider: c.Provider, Machine: c.Machine, Consumer: c.Consumer}
	if err := g.Call(ctx, wire.SubjectReport, req, &r); err != nil {
		return err
	}
	if c.JSON {
		return text.JSON(out.Out, r)
	}
	if !r.Changed {
		fmt.Fprintf(out.Out, "%s on %s was not failing %s; nothing to do\n", c.Provider, c.Machine, c.Consumer)
		return nil
	}
	fmt.Fprintf(out.Out, "recorded: %s on %s serves %s again (sequence %d)\n", c.Provider, c.Machine, c.Consumer, r.Seq)
	return nil
}
