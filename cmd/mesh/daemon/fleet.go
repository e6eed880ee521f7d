package daemon

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/meshctl/mesh/agent"
	"github.com/meshctl/mesh/aggregates"
	"github.com/meshctl/mesh/busauth"
	"github.com/meshctl/mesh/client"
	"github.com/meshctl/mesh/cmd/mesh/cmdline"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/fanout"
	"github.com/meshctl/mesh/fleet"
	"github.com/meshctl/mesh/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// FleetCmd runs many real agents in this process: the load harness the
// mesh's fleet figures are measured with.
type FleetCmd struct {
	Agents int               `default:"100" help:"How many agents to run, each with its own connection, identity, root and state."`
	Prefix string            `default:"fleet" help:"Nodes are named PREFIX-00000 on; each is enrolled once (capability linux, label fleet=PREFIX) if it is not yet."`
	Dir    string            `help:"Where the agents' roots and states go (default: a fresh temporary directory, removed at the end)."`
	Assign string            `help:"Assign this registered module to every fleet node before pushing."`
	Set    map[string]string `mapsep:"none" help:"With --assign: a setting k=v for the module (repeatable)."`
	Push   int               `help:"Push this many times, each measured from the command to the last agent's report, then stop. Without it, the agents run until interrupted."`
	// A configurable bound for the tests: beside other work on two cores,
	// 2,000 agents reporting at once wait more than an agent's 5 s for an
	// acknowledgement, keep the report for later, and warn.
	AgentTimeout time.Duration `help:"How long each agent waits for the bus on one read or report before it tries again later (and warns); default: the agent's own, 5s."`
	Simulate     bool          `help:"Play the agents on one connection instead: record each node's report key, answer each declaration with the report applying it would make (signed and MAC'd as the node's), apply nothing. For fleets beyond one machine's processes; needs an open bus (mesh serve --open-bus)."`
	DerivedKeys  bool          `help:"Run the agents with keys derived from the controller key, as nodes enrolled before agents made their own: their reports are checked by MAC, not each by its signature. Only for nodes whose agents never made keys (another --prefix, or a fresh home). By default each agent makes its keys and enrols them with a token of its node's, as an operator's machine does."`
}

func (c *FleetCmd) Help() string {
	return "Examples:\n  mesh fleet --agents 10000 --assign app --push 3\n  mesh fleet --agents 2000      # then mesh push from another shell\n\n" +
		"Each agent verifies, applies and reports for real, as mesh agent does; only their logs are\n" +
		"counted rather than printed. Roots on a tmpfs stand in for ten thousand machines' own disks."
}

func (c *FleetCmd) Run(ctx context.Context, g *cmdline.Globals, out *cmdline.Output) error {
	if c.Agents < 1 {
		return cmdline.Usagef("--agents must be at least 1")
	}
	cl, closeFn, err := g.Client()
	if err != nil {
		return err
	}
	defer closeFn()
	dir := c.Dir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "mesh-fleet-"); err != nil {
			return err
		}
		defer os.RemoveAll(dir)
	}
	names := make([]wire.EnrollRequest, c.Agents)
	for i := range names {
		names[i] = wire.EnrollRequest{Name: fmt.Sprintf("%s-%05d", c.Prefix, i), Capabilities: []string{"linux"}, Labels: map[string]string{"fleet": c.Prefix}}
	}
	start := time.Now()
	enrolled, err := cmdline.EnrollBatches(ctx, cl, out, names)
	if err != nil {
		return err
	}
	fmt.Fprintf(out.Out, "%d fleet node(s): %d enrolled now, in %s\n", c.Agents, len(enrolled.Changed), since(start))
	if c.Assign != "" {
		start = time.Now()
		nodes := make([]string, len(names))
		for i, n := range names {
			nodes[i] = n.Name
		}
		assigned, err := cmdline.AssignBatches(ctx, cl, out, wire.AssignBatchRequest{Module: c.Assign, Settings: c.Set}, nodes)
		if err != nil {
			return err
		}
		fmt.Fprintf(out.Out, "assigned %s to %d fleet node(s) in %s\n", c.Assign, len(assigned.Changed), since(start))
	}
	// The mesh and the controller key every join string names.
	var list wire.TokenList
	if err := cl.Call(ctx, wire.SubjectTokenList, wire.Empty{}, &list); err != nil {
		return err
	}
	var joins []agent.Join
	if c.Simulate || c.DerivedKeys {
		joins, err = fleetJoins(g, cl, list, names)
	} else {
		start = time.Now()
		var made tokensMade
		if joins, made, err = fleetTokens(ctx, cl, list, names, dir); err == nil {
			fmt.Fprintf(out.Out, "%s, in %s\n", made, since(start))
		}
	}
	if err != nil {
		return err
	}
	consumersBefore := consumers(ctx, cl)
	start = time.Now()
	var f *fleet.Fleet
	if c.Simulate {
		f, err = fleet.Simulate(ctx, cl.NC, joins)
	} else {
		// dial connects as j says (its CA, and its key once it has one),
		// with more: an agent's own connection, or its enrolment's.
		dial := func(j agent.Join, what string, more ...nats.Option) (*nats.Conn, error) {
			identity, err := j.Options()
			if err != nil {
				return nil, err
			}
			return cmdline.Connect(cmdline.BusAddr{URL: j.Bus, From: "the join string"}, "mesh fleet "+j.Node+what,
				append(append(identity, more...), nats.Timeout(max(cmdline.AgentConnectTimeout, c.AgentTimeout)))...)
		}
		f, err = fleet.Start(ctx, fleet.Config{Joins: joins, Dir: dir, Applying: ApplySlots(c.Agents), Timeout: c.AgentTimeout, Connect: func(j agent.Join) (*nats.Conn, error) {
			nc, err := dial(j, "", nats.MaxReconnects(-1), nats.IgnoreAuthErrorAbort())
			return nc, fleetRefused(err, j, dir, c.DerivedKeys)
		}, Dial: func(j agent.Join, opts ...nats.Option) (*nats.Conn, error) {
			return dial(j, " enrolling", opts...)
		}})
	}
	if err != nil {
		return err
	}
	defer f.Stop()
	what := "agent(s) connected and following"
	if c.Simulate {
		what = "simulated agent(s) recorded their report keys and are listening"
	}
	fmt.Fprintf(out.Out, "%d %s in %s; consumers on the stream: %s before, %s now\n",
		f.Len(), what, since(start), consumersBefore, consumers(ctx, cl))
	if c.Push == 0 {
		fmt.Fprintln(out.Out, "running until interrupted; push from another shell (mesh push) and each round is timed here")
		return watchRounds(ctx, out, f)
	}
	cl.Timeout = g.TimeoutOr(5 * time.Minute)
	for i := range c.Push {
		if err := timedPush(ctx, out, cl, f, i+1); err != nil {
			return err
		}
	}
	if n, first := f.Warnings(); n > 0 {
		return fmt.Errorf("the agents logged %d warning(s); the first: %s", n, first)
	}
	return nil
}

// timedPush pushes to every node and waits for every fleet agent's report
// on what it was sent: the figure an operator feels, from the command to
// the last machine's answer.
func timedPush(ctx context.Context, out *cmdline.Output, cl *client.Client, f *fleet.Fleet, round int) error {
	start := time.Now()
	var r wire.PushReply
	if err := cl.Call(ctx, wire.SubjectPush, wire.PushRequest{CommandID: wire.NewCommandID()}, &r); err != nil {
		return err
	}
	answered := time.Since(start)
	want := map[string]uint64{}
	for _, s := range r.Sent {
		want[s.Node] = s.Sequence
	}
	for n := range want {
		if !f.Has(n) {
			delete(want, n) // a node of the mesh this fleet does not run
		}
	}
	if len(want) == 0 {
		// Nothing to wait for, and no last report to time: say why rather
		// than print a time since the zero moment.
		if len(r.Unsent) == 0 {
			return fmt.Errorf("push %d: the push sent nothing to this fleet's nodes", round)
		}
		return fmt.Errorf("push %d: %d node(s) not sent%s", round, len(r.Unsent), firstUnsent(r))
	}
	wctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	got, err := f.Await(wctx, want)
	if err != nil {
		return err
	}
	fmt.Fprintf(out.Out, "push %d: sent %d of %d node(s), answered in %s; all %d fleet agent(s) reported %s after the command (%d applied, %d failed, %d refused)\n",
		round, len(r.Sent), r.Considered, answered.Round(time.Millisecond), len(want), got.Last.Sub(start).Round(time.Millisecond), got.Applied, got.Failed, got.Refused)
	if len(r.Unsent) > 0 || got.Failed+got.Refused > 0 {
		return fmt.Errorf("push %d: %d node(s) not sent, %d failed, %d refused%s", round, len(r.Unsent), got.Failed, got.Refused, firstUnsent(r))
	}
	return nil
}

// firstUnsent names the first node a push did not send to, and why; "" when
// it sent to every one.
func firstUnsent(r wire.PushReply) string {
	if len(r.Unsent) == 0 {
		return ""
	}
	return fmt.Sprintf("; the first, %s: %s", r.Unsent[0].Node, r.Unsent[0].Reason)
}

// watchRounds says, each time the fleet goes quiet after reporting, how
// many reports came and how long from the first to the last.
func watchRounds(ctx context.Context, out *cmdline.Output, f *fleet.Fleet) error {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	for {
		r, err := f.NextRound(ctx, time.Second)
		if err != nil {
			return nil // interrupted: the agents stop with the command
		}
		fmt.Fprintf(out.Out, "%d report(s) in %s from the first to the last: %d applied, %d failed, %d refused\n",
			r.Applied+r.Failed+r.Refused, r.Last.Sub(r.First).Round(time.Millisecond), r.Applied, r.Failed, r.Refused)
	}
}

// fleetTokens are the fleet's join strings as an operator's machines get
// them (issue 29): each node's own one-use token (mesh node join), with
// which its agent enrols the keys it makes; the fold then checks each of
// its reports by the agent's own signature. A node whose keys an agent of
// an earlier fleet made in another directory is re-keyed (mesh node
// rekey), as a new machine for it would be; one whose keys are in dir
// already needs no token, its agent reads them there. The first failure
// stops the rest: ten thousand sentences, or ten thousand waits on a
// controller that does not answer, tell an operator nothing more.
func fleetTokens(ctx context.Context, cl *client.Client, list wire.TokenList, names []wire.EnrollRequest, dir string) ([]agent.Join, tokensMade, error) {
	var made tokensMade
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	joins := make([]agent.Join, len(names))
	errs := make([]error, len(names))
	var joined, rekeyed, kept atomic.Int64
	fanout.Each(len(names), tokenCallsAtOnce, func(i int) {
		name := names[i].Name
		joins[i] = agent.Join{Mesh: list.Mesh, Bus: cl.NC.ConnectedUrl(), Node: name, Key: list.Key}
		if agent.Enrolled(fleet.StateDir(dir, name)) {
			kept.Add(1)
			return
		}
		if ctx.Err() != nil {
			errs[i] = ctx.Err()
			return
		}
		var id wire.Identity
		err := cl.Call(ctx, wire.SubjectNodeJoin, wire.NameRequest{Name: name}, &id)
		switch {
		case err == nil:
			joined.Add(1)
		case errors.Is(err, aggregates.ErrInvalid):
			// Refused because an earlier agent made its keys, which this
			// directory does not hold: this fleet's agent is a new machine
			// for it. (A retired or unknown node is another refusal.)
			if rekeyErr := cl.Call(ctx, wire.SubjectNodeRekey, wire.NameRequest{Name: name}, &id); rekeyErr != nil {
				err = fmt.Errorf("%w; and a re-key: %w", err, rekeyErr)
			} else {
				err = nil
				rekeyed.Add(1)
			}
		}
		if err != nil {
			errs[i] = err
			cancel()
			return
		}
		joins[i].Token = id.Token
	})
	made = tokensMade{Joined: int(joined.Load()), Rekeyed: int(rekeyed.Load()), Kept: int(kept.Load())}
	failed, stopped := 0, 0
	var first error
	for i, err := range errs {
		switch {
		case err == nil:
		case errors.Is(err, context.Canceled):
			stopped++ // cut short, or never asked, after a failure
		default:
			failed++
			if first == nil {
				first = fmt.Errorf("%s: %w", names[i].Name, err)
			}
		}
	}
	if first == nil && stopped > 0 {
		first = ctx.Err() // the caller's own end
	}
	if first != nil {
		return nil, made, fmt.Errorf("cannot make the agents' tokens: %d failed, %d not asked or cut short after the first failure, %d made and %d kept; the first: %w",
			failed, stopped, made.Joined+made.Rekeyed, made.Kept, first)
	}
	return joins, made, nil
}

// fleetRefused says why the bus refused an agent whose keys the fleet
// chose, and what to do, where the bus says only "Authorization Violation".
func fleetRefused(err error, j agent.Join, dir string, derived bool) error {
	switch {
	case !errors.Is(err, nats.ErrAuthorization):
		return err
	case derived:
		return fmt.Errorf("the bus refused %s's key derived from the controller key, most likely because an agent made its own keys for it since (mesh audit %s says); --derived-keys needs nodes whose agents never did, another --prefix or a fresh home: %w", j.Node, j.Node, err)
	case j.Token == "":
		return fmt.Errorf("the bus refused the keys %s's agent enrolled in %s, most likely because the node was re-keyed since (mesh audit %s says); give the fleet a fresh --dir: %w", j.Node, dir, j.Node, err)
	}
	return err
}

// tokensMade is what fleetTokens did, to say: tokens for nodes without
// keys, re-keys of nodes whose keys an agent elsewhere made, and nodes
// whose keys the fleet's directory already holds.
type tokensMade struct{ Joined, Rekeyed, Kept int }

func (t tokensMade) String() string {
	return fmt.Sprintf("%d token(s) made for the agents to enrol the keys they make, %d node(s) re-keyed for this fleet's agents (their keys were an agent's elsewhere), %d agent(s) with their keys already in the fleet's directory",
		t.Joined, t.Rekeyed, t.Kept)
}

// tokenCallsAtOnce bounds the token requests in flight: each is an append.
const tokenCallsAtOnce = 64

// fleetJoins are the fleet's identities as nodes enrolled before agents made
// their own keys: each derived from the controller key in the home, as
// such a node's always was (mesh fleet --derived-keys, and the simulated
// fleet, which plays its nodes on one connection with their MACs). What
// they cost a push differs from an operator's machines in one check: the
// fold holds a report of a node that made its keys to its signature.
func fleetJoins(g *cmdline.Globals, cl *client.Client, list wire.TokenList, names []wire.EnrollRequest) ([]agent.Join, error) {
	kp, err := busauth.HomeKey(g.Home, false)
	if err != nil {
		return nil, fmt.Errorf("a fleet harness derives its agents' keys from the controller key, and %v", err)
	}
	joins := make([]agent.Join, len(names))
	for i, n := range names {
		node, err := busauth.NodeKey(kp, n.Name)
		if err != nil {
			return nil, err
		}
		seed, _ := node.Seed()
		joins[i] = agent.Join{Mesh: list.Mesh, Bus: cl.NC.ConnectedUrl(), Node: n.Name, Key: list.Key, Seed: string(seed)}
	}
	return joins, nil
}

// consumers is how many consumers the stream has, as nats stream info says.
func consumers(ctx context.Context, cl *client.Client) string {
	js, err := jetstream.New(cl.NC)
	if err != nil {
		return "unknown"
	}
	s, err := js.Stream(ctx, events.Stream)
	if err != nil {
		return "unknown"
	}
	info, err := s.Info(ctx)
	if err != nil {
		return "unknown"
	}
	return fmt.Sprint(info.State.Consumers)
}

// ApplySlots is how many of agents agents may apply at once in this
// process: each holds its connection all along, and while it applies its
// root, a file being written and the state file being replaced. Ten
// thousand machines each have their own descriptor table; one process
// standing in for them has one, which the limit may not let be raised
// (ulimit -Hn). An agent that cannot open its root reports failed, and the
// fleet would measure the table rather than the mesh. 0: no bound needed.
func ApplySlots(agents int) int {
	const perApply, spare = 3, 1024
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0
	}
	free := int(min(lim.Cur, 1<<30)) - agents - spare
	if free >= agents*perApply {
		return 0
	}
	return max(free/perApply, 1)
}

func since(t time.Time) time.Duration { return time.Since(t).Round(time.Millisecond) }
