package daemon

import (
	"context"
	"fmt"
	"time"

	"github.com/meshctl/mesh/busauth"
	"github.com/meshctl/mesh/cmd/mesh/cmdline"
	"github.com/meshctl/mesh/declaration"
	"github.com/meshctl/mesh/fleet"
)

// TrafficCmd writes a long stream of a busy mesh's traffic straight to the
// log, for measuring what a long stream costs (a start from a snapshot at
// ten million events, issue 34), which pushes through the controller take
// hours to reach on two cores. Hidden: it is a bench's tool, it signs as
// the controller, and it is for a mesh of its own.
type TrafficCmd struct {
	Events uint64 `default:"1000000" help:"About how many events to write."`
	Nodes  int    `default:"100000" help:"How many nodes the traffic is of (enrolled by it, named PREFIX-000000 on)."`
	Prefix string `default:"traffic" help:"The nodes' names begin with this."`
}

func (c *TrafficCmd) Help() string {
	return "Examples:\n  mesh traffic --home HOME --bus URL --events 10000000   # HOME: the home of the mesh serve of that bus\n\n" +
		"Enrolments, report keys, then rounds of a declaration sent to each node (signed by the controller\n" +
		"key in --home, appended expecting the node's version, as a push appends) and its report applying it\n" +
		"(signed and MAC'd as the node's). Needs an open bus (mesh serve --open-bus): every node's reports\n" +
		"go out on one connection."
}

func (c *TrafficCmd) Run(ctx context.Context, g *cmdline.Globals, out *cmdline.Output) error {
	if c.Nodes < 1 || c.Events == 0 {
		return cmdline.Usagef("--nodes and --events must be at least 1")
	}
	kp, err := busauth.HomeKey(g.Home, false)
	if err != nil {
		return fmt.Errorf("mesh traffic signs as the controller, and cannot read its key in the home %s (give the --home of the mesh serve of this bus): %w", g.Home, err)
	}
	keys, err := declaration.NewKeyring(kp)
	if err != nil {
		return err
	}
	st, closeBus, err := g.Log(ctx, true, "mesh traffic")
	if err != nil {
		return err
	}
	defer closeBus()
	st.MAC = keys.LogMAC()
	start := time.Now()
	next := uint64(0)
	n, err := fleet.Traffic(ctx, st.NC(), st, kp, fleet.TrafficConfig{Nodes: c.Nodes, Events: c.Events, Prefix: c.Prefix, Progress: func(w uint64) {
		if w >= next {
			fmt.Fprintf(out.Out, "%d event(s) in %s\n", w, since(start))
			next = w + 1_000_000
		}
	}})
	if err != nil {
		return fmt.Errorf("after %d event(s): %w", n, err)
	}
	fmt.Fprintf(out.Out, "wrote %d event(s) of %d node(s) in %s (%.0f a second)\n", n, c.Nodes, since(start), float64(n)/time.Since(start).Seconds())
	return nil
}
