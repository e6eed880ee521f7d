package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/meshctl/mesh/agent"
	"github.com/meshctl/mesh/cmd/mesh/cmdline"
	"github.com/nats-io/nats.go"
)

// AgentCmd runs the node side.
type AgentCmd struct {
	Join     string `env:"MESH_JOIN" help:"The join string mesh node enroll (or mesh node join NAME) printed. A secret: prefer --join-file or MESH_JOIN, which ps does not show."`
	JoinFile string `name:"join-file" env:"MESH_JOIN_FILE" help:"A file holding the join string (mode 0600): how a service unit gives it."`
	Root     string `required:"" help:"The directory declared paths land under: /etc/app/app.conf is written to ROOT/etc/app/app.conf."`
	State    string `help:"Where the agent keeps its keys, what it applied and what the mesh owns (default: ROOT.state, beside the root)."`
	Name     string `help:"The node's name, for a join string whose token enrols any name (mesh token create); default: the machine's host name."`
	// CheckEvery is the drift check's interval (the declaration itself
	// is heard as it is sent, and read again every 10 s besides).
	CheckEvery time.Duration `default:"3m" help:"How often to check that what the mesh owns under the root is what was applied (and at start)."`
	Drift      string        `default:"correct" enum:"correct,report" help:"On drift: correct (put it back, reported as a corrective change) or report (leave it; the node is drifted until the next apply)."`
	// LogKiB bounds each program's log (mesh logs), in KiB.
	LogKiB int `name:"log-kib" default:"256" placeholder:"KIB" help:"How much of each program's newest output (stdout and stderr, mesh logs) the node keeps, in KiB: the oldest lines drop first; on disk under the state directory, at most twice it."`
}

func (c *AgentCmd) Run(ctx context.Context, g *cmdline.Globals, out *cmdline.Output) error {
	switch {
	case c.Join != "" && c.JoinFile != "":
		return cmdline.Usagef("give the join string once: --join (or MESH_JOIN) or --join-file, not both")
	case c.JoinFile != "":
		b, err := os.ReadFile(c.JoinFile)
		if err != nil {
			return cmdline.Usagef("cannot read the join string from %s: %v", c.JoinFile, err)
		}
		c.Join = strings.TrimSpace(string(b))
	case c.Join == "":
		return cmdline.Usagef("no join string: give --join-file FILE (or set MESH_JOIN); mesh node join NAME prints it")
	}
	j, err := agent.ParseJoin(c.Join)
	if err != nil {
		return cmdline.Usagef("%v", err)
	}
	if c.LogKiB < agent.MinLogBytes>>10 {
		return cmdline.Usagef("--log-kib %d cannot hold a program's longest lines: give at least %d", c.LogKiB, agent.MinLogBytes>>10)
	}
	if c.CheckEvery <= 0 {
		return cmdline.Usagef("--check-every %s is not a duration to wait: give one such as 3m", c.CheckEvery)
	}
	addr := cmdline.BusAddr{URL: j.Bus, From: "the join string"}
	if g.BusNamed() {
		given, err := g.ResolveBus(true)
		if err != nil {
			return err
		}
		if cmdline.NormalizeURL(given.URL) != cmdline.NormalizeURL(j.Bus) {
			return cmdline.Usagef("the bus is configured two ways: the join string says %s and %s says %s; give one, or make them agree", j.Bus, given.From, given.URL)
		}
	}
	log := g.Logger(out.Err)
	if j, err = c.enrol(ctx, g, j, addr, log); err != nil {
		return err
	}
	identity, err := j.Options()
	if err != nil {
		return cmdline.Usagef("%v", err)
	}
	// --tls-ca and the rest, for a cluster whose TLS the join string does
	// not carry (a join string's CA comes first: it is this mesh's).
	secure, err := g.TLSOptions()
	if err != nil {
		return err
	}
	identity = append(secure, identity...)
	// IgnoreAuthErrorAbort: while the controller restarts, a closed bus
	// refuses connections until it answers again; the agent keeps trying
	// rather than giving up after two refusals.
	follow := []nats.Option{nats.MaxReconnects(-1), nats.IgnoreAuthErrorAbort(), busLog(log), nats.Timeout(cmdline.AgentConnectTimeout)}
	nc, err := cmdline.Connect(addr, "mesh agent "+j.Node, append(identity, follow...)...)
	if errors.Is(err, nats.ErrNkeysNotSupported) {
		// A bus nobody closed (mesh serve --open-bus) asks no identity,
		// and nats.go will not offer a key to a server that asks none: so
		// no agent could join it at all. It joins without its key; what
		// it reads is still held to the controller key it pinned (and the
		// join string's CA), and what it says to its node's keys.
		log.Warn("the bus asks no identity (it is open: mesh serve --open-bus), so the agent joins it without its node's key", "bus", j.Bus)
		anonymous, aerr := agent.Join{Node: j.Node, CA: j.CA}.Options()
		if aerr != nil {
			return cmdline.Usagef("%v", aerr)
		}
		nc, err = cmdline.Connect(addr, "mesh agent "+j.Node, append(append(secure, anonymous...), follow...)...)
	}
	if errors.Is(err, nats.ErrAuthorization) {
		// The bus says only "authorization violation": each cause the
		// controller may have had is named, with where to find which.
		return fmt.Errorf("the bus at %s refused %s: it is retired, re-keyed (mesh node rekey), cut for a while for flooding, or was enrolled with other keys; mesh node show %s and mesh status say which", j.Bus, j.Node, j.Node)
	}
	if err != nil {
		return err
	}
	defer nc.Close()
	a, err := agent.Open(ctx, nc, agent.Config{Join: j, Root: c.Root, State: c.State, Log: log,
		DriftEvery: c.CheckEvery, DriftReport: c.Drift == "report", LogBytes: c.LogKiB << 10,
		// Under systemd (Type=notify), ready once it follows its node.
		Observe: func(o agent.Observation) {
			if o.Following {
				if err := notifyReady(); err != nil {
					log.Warn("cannot tell systemd this service is ready", "err", err)
				}
			}
		}})
	if err != nil {
		return err
	}
	defer a.Close()
	log.Info("agent starting", "node", j.Node, "mesh", j.Mesh, "root", c.Root, "controller_key", j.Key)
	return a.Run(ctx)
}

// enrol makes the node's keys and enrols them when the join string holds a
// token and the state directory has not yet (issue 29); the join answered
// carries the node's own seed.
func (c *AgentCmd) enrol(ctx context.Context, g *cmdline.Globals, j agent.Join, addr cmdline.BusAddr, log *slog.Logger) (agent.Join, error) {
	if j.Seed != "" {
		return j, nil
	}
	switch {
	case j.Node != "" && c.Name != "" && c.Name != j.Node:
		return j, cmdline.Usagef("the join string's token enrols %s, and --name says %s; drop --name or ask for a token for %s", j.Node, c.Name, c.Name)
	case j.Node == "" && c.Name != "":
		j.Node = c.Name
	}
	opts, err := j.Options()
	if err != nil {
		return j, cmdline.Usagef("%v", err)
	}
	secure, err := g.TLSOptions()
	if err != nil {
		return j, err
	}
	dial := func(more ...nats.Option) (*nats.Conn, error) {
		return cmdline.Connect(addr, "mesh agent "+j.Node+" enrolling", append(append(secure, opts...), more...)...)
	}
	return agent.Enrol(ctx, j, agent.StateDir(c.Root, c.State), dial, log)
}

// busLog says what happens to the agent's connection in its own log: on a
// closed bus the connection's permissions run out every few minutes and it
// connects again, which is routine, not an error.
func busLog(log *slog.Logger) nats.Option {
	return func(o *nats.Options) error {
		o.AsyncErrorCB = func(_ *nats.Conn, _ *nats.Subscription, err error) {
			if errors.Is(err, nats.ErrAuthExpired) {
				log.Info("the bus ended this connection's lifetime; connecting again, to be decided afresh")
				return
			}
			log.Warn("bus", "err", err)
		}
		o.ReconnectedCB = func(nc *nats.Conn) { log.Info("connected again", "bus", nc.ConnectedUrlRedacted()) }
		return nil
	}
}
