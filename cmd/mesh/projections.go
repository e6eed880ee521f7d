package main

import (
	"context"
	"fmt"
	"time"

	"github.com/meshctl/mesh/commands"
)

// ProjectionsCmd is the read-model command group.
type ProjectionsCmd struct {
	Status  ProjectionsStatusCmd  `cmd:"" help:"Where the read models stand: checkpoint, stream position, lag."`
	Verify  ProjectionsVerifyCmd  `cmd:"" help:"Fold the whole stream afresh and compare it with the live read models."`
	Rebuild ProjectionsRebuildCmd `cmd:"" help:"Fold the whole stream into fresh read models and swap them in; the old ones serve meanwhile."`
}

type ProjectionsStatusCmd struct {
	JSON bool `help:"Print the status as JSON."`
}

func (c *ProjectionsStatusCmd) Run(ctx context.Context, g *Globals, out *Output) error {
	var s commands.StatusReply
	if err := g.call(ctx, commands.SubjectProjectionsStatus, commands.Empty{}, &s); err != nil {
		return err
	}
	if c.JSON {
		if err := printJSON(out.Out, s); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(out.Out, "read models %s: folded up to event %d of %d (lag %d)\n", s.Generation, s.Checkpoint, s.StreamLast, s.Lag)
	}
	if s.Failure != "" {
		return fmt.Errorf("the read models stopped folding: %s", s.Failure)
	}
	return nil
}

type ProjectionsRebuildCmd struct {
	Timeout time.Duration `default:"30m" help:"How long to wait for the rebuild."`
}

func (c *ProjectionsRebuildCmd) Run(ctx context.Context, g *Globals, out *Output) error {
	cl, closeFn, err := g.client()
	if err != nil {
		return err
	}
	defer closeFn()
	cl.Timeout = c.Timeout
	var r commands.RebuildReply
	if err := cl.Call(ctx, commands.SubjectProjectionsRebuild, commands.Empty{}, &r); err != nil {
		return err
	}
	fmt.Fprintf(out.Out, "rebuilt the read models: %s replaced by %s, %d event(s) folded in %.2fs, now at event %d\n",
		r.From, r.To, r.Events, r.Seconds, r.Checkpoint)
	return nil
}

type ProjectionsVerifyCmd struct {
	Timeout time.Duration `default:"30m" help:"How long to wait for the fold."`
}

func (c *ProjectionsVerifyCmd) Run(ctx context.Context, g *Globals, out *Output) error {
	cl, closeFn, err := g.client()
	if err != nil {
		return err
	}
	defer closeFn()
	cl.Timeout = c.Timeout
	var v commands.Verified
	if err := cl.Call(ctx, commands.SubjectProjectionsVerify, commands.Empty{}, &v); err != nil {
		return err
	}
	if v.Diff != "" {
		fmt.Fprintf(out.Out, "the live read models differ from a fresh fold of events 1 to %d (-live +fresh):\n%s", v.Checkpoint, v.Diff)
		return fmt.Errorf("the read models do not equal a fold of the stream; mesh projections rebuild replaces them")
	}
	fmt.Fprintf(out.Out, "the read models equal a fresh fold of events 1 to %d (%.2fs)\n", v.Checkpoint, v.Seconds)
	return nil
}
