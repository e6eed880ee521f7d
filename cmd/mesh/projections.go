package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/meshctl/mesh/client"
	"github.com/meshctl/mesh/cmd/mesh/cmdline"
	"github.com/meshctl/mesh/cmd/mesh/text"
	"github.com/meshctl/mesh/wire"
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

func (c *ProjectionsStatusCmd) Run(ctx context.Context, g *cmdline.Globals, out *cmdline.Output) error {
	var s wire.StatusReply
	if err := g.Call(ctx, wire.SubjectProjectionsStatus, wire.Empty{}, &s); err != nil {
		return err
	}
	if c.JSON {
		if err := text.JSON(out.Out, s); err != nil {
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
	JSON bool `help:"Print {from, to, events, checkpoint, seconds} as JSON."`
}

func (c *ProjectionsRebuildCmd) Run(ctx context.Context, g *cmdline.Globals, out *cmdline.Output) error {
	var r wire.RebuildReply
	if err := foldCall(ctx, g, out, wire.SubjectProjectionsRebuild, g.TimeoutOr(30*time.Minute), &r); err != nil {
		return err
	}
	if c.JSON {
		return text.JSON(out.Out, r)
	}
	fmt.Fprintf(out.Out, "rebuilt the read models: %s replaced by %s, %d event(s) folded in %.2fs, now at event %d\n",
		r.From, r.To, r.Events, r.Seconds, r.Checkpoint)
	return nil
}

// foldCall asks the controller for a long fold (rebuild, verify), showing
// its progress while it runs.
func foldCall(ctx context.Context, g *cmdline.Globals, out *cmdline.Output, subject string, timeout time.Duration, resp any) error {
	cl, closeFn, err := g.Client()
	if err != nil {
		return err
	}
	defer closeFn()
	cl.Timeout = timeout
	req, done, err := followProgress(cl, out, "folded", "event(s)", false)
	if err != nil {
		return err
	}
	err = cl.Call(ctx, subject, req, resp)
	done()
	return err
}

type ProjectionsVerifyCmd struct {
	JSON bool `help:"Print {checkpoint, diff, seconds} as JSON (diff empty when they are equal; exit 1 when not)."`
}

func (c *ProjectionsVerifyCmd) Run(ctx context.Context, g *cmdline.Globals, out *cmdline.Output) error {
	var v wire.Verified
	if err := foldCall(ctx, g, out, wire.SubjectProjectionsVerify, g.TimeoutOr(30*time.Minute), &v); err != nil {
		return err
	}
	if c.JSON {
		if err := text.JSON(out.Out, v); err != nil {
			return err
		}
		return verifyOutcome(v)
	}
	if v.Diff != "" {
		fmt.Fprintf(out.Out, "the live read models differ from a fresh fold of events 1 to %d (-live +fresh):\n%s", v.Checkpoint, v.Diff)
	} else {
		fmt.Fprintf(out.Out, "the read models equal a fresh fold of events 1 to %d (%.2fs)\n", v.Checkpoint, v.Seconds)
	}
	if s := v.Snapshot; s != nil {
		name := fmt.Sprintf("the newest snapshot on the bus (%s, %d bytes)", s.Name, s.Bytes)
		switch {
		case s.Refused != "":
			fmt.Fprintf(out.Out, "%s is not one a controller would start from: %s\n", name, s.Refused)
		case s.Diff != "":
			fmt.Fprintf(out.Out, "%s differs from a fresh fold of events 1 to %d (-snapshot +fresh):\n%s", name, s.Checkpoint, s.Diff)
		default:
			fmt.Fprintf(out.Out, "%s holds its proof and digest and equals a fresh fold of events 1 to %d\n", name, s.Checkpoint)
		}
	}
	return verifyOutcome(v)
}

// verifyOutcome is verify's exit: read models, or a snapshot a controller
// would start from, that differ from the fold, and a snapshot that fails
// its proof or digest, exit 1. A stale snapshot (another schema or
// stream) is no fault: the controller publishes a new one.
func verifyOutcome(v wire.Verified) error {
	switch s := v.Snapshot; {
	case v.Diff != "":
		return fmt.Errorf("the read models do not equal a fold of the stream; mesh projections rebuild replaces them")
	case s != nil && s.Diff != "":
		return fmt.Errorf("the newest snapshot on the bus does not equal a fold of the stream; a controller starting from it would serve read models that verify refuses, until mesh projections rebuild replaces them")
	case s != nil && s.Refused != "" && !s.Stale:
		return fmt.Errorf("the newest snapshot on the bus is not this controller's (%s); no controller starts from it, but whoever can write its object store on the bus made it", s.Refused)
	}
	return nil
}

// followProgress subscribes to a fresh inbox the controller reports fold
// progress on, and prints it: one line rewritten in place on a terminal,
// plain lines otherwise (a log or a pipe keeps every one).
func followProgress(cl *client.Client, out *cmdline.Output, verb, unit string, ttyOnly bool) (wire.FoldRequest, func(), error) {
	inbox := cl.NC.NewRespInbox()
	tty := cmdline.IsTerminal(out.Err)
	var printed atomic.Bool
	sub, err := cl.NC.Subscribe(inbox, func(m *nats.Msg) {
		var p wire.FoldProgress
		if json.Unmarshal(m.Data, &p) != nil {
			return
		}
		line := fmt.Sprintf("%s %d of %d %s, %.0f/s", verb, p.Folded, p.Total, unit, p.Rate)
		if ttyOnly && !tty {
			return
		}
		if tty {
			fmt.Fprintf(out.Err, "\r%s\x1b[K", line)
			printed.Store(true)
		} else {
			fmt.Fprintln(out.Err, line)
		}
	})
	if err != nil {
		return wire.FoldRequest{}, nil, err
	}
	// The subscription must reach the server before the controller publishes.
	if err := cl.NC.Flush(); err != nil {
		sub.Unsubscribe()
		return wire.FoldRequest{}, nil, err
	}
	return wire.FoldRequest{Progress: inbox}, func() {
		sub.Unsubscribe()
		if printed.Load() {
			fmt.Fprintln(out.Err)
		}
	}, nil
}
