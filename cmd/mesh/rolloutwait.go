package main

import (
	"context"
	"fmt"
	"time"

	"github.com/meshctl/mesh/cmd/mesh/cmdline"
	"github.com/meshctl/mesh/cmd/mesh/text"
	"github.com/meshctl/mesh/wire"
)

// RolloutWaitCmd waits for a rollout to end, as a script or a CI job does
// after rollout start: exit 0 once it finished, 1 when it halted, was
// aborted, or still runs when the wait ends.
type RolloutWaitCmd struct {
	ID   string        `arg:""`
	For  time.Duration `default:"1h" help:"Wait at most this long (such as 30m); the rollout goes on either way."`
	JSON bool          `help:"Print the rollout as it stands when the wait ends, as JSON (rollout show --json's shape); the exit code says how it ended."`
}

func (c *RolloutWaitCmd) Help() string {
	return "Examples:\n  mesh rollout wait r-0a1b2c3d4e --for 30m\n\n" +
		"It prints a line each time the rollout moves (a wave, a pause), and the last one when it ends."
}

// rolloutWaitEvery is how often the wait asks where the rollout stands: a
// wave takes seconds at the least, and each ask is one small request.
const rolloutWaitEvery = 500 * time.Millisecond

func (c *RolloutWaitCmd) Run(ctx context.Context, g *cmdline.Globals, out *cmdline.Output) error {
	if c.For <= 0 {
		return cmdline.Usagef("--for %s: give how long to wait, such as 30m", c.For)
	}
	deadline := time.Now().Add(c.For)
	said := ""
	for {
		var r wire.RolloutView
		if err := g.Call(ctx, wire.SubjectRolloutShow, wire.NameRequest{Name: c.ID}, &r); err != nil {
			return err
		}
		// Read once: the JSON answer and the exit below must agree on it.
		late := time.Now().After(deadline)
		ended := r.State == wire.RolloutFinished || r.State == wire.RolloutHalted || r.State == wire.RolloutAborted
		if c.JSON && (ended || late) {
			// One answer, the last: the lines of its moves are for people.
			if err := text.JSON(out.Out, r); err != nil {
				return err
			}
		}
		text.Showable(&r)
		if line := text.RolloutLine(r.Rollout); line != said && !c.JSON {
			fmt.Fprintln(out.Out, line)
			said = line
		}
		switch r.State {
		case wire.RolloutFinished:
			return nil
		case wire.RolloutHalted, wire.RolloutAborted:
			return cmdline.ExitError{Code: 1, Err: fmt.Errorf("rollout %s %s: it did not finish (mesh rollout show %s)", r.ID, r.State, r.ID)}
		}
		if late {
			return cmdline.ExitError{Code: 1, Err: fmt.Errorf("rollout %s is still %s after %s; it goes on: wait again, or see mesh rollout show %s", r.ID, r.State, c.For, r.ID)}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(rolloutWaitEvery):
		}
	}
}
