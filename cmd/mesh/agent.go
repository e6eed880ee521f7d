package main

import (
	"context"
	"fmt"

	"github.com/meshctl/mesh/agent"
	"github.com/meshctl/mesh/commands"
	"github.com/nats-io/nats.go"
)

// AgentCmd runs the node side.
type AgentCmd struct {
	Join  string `required:"" env:"MESH_JOIN" help:"The join string mesh node enroll (or mesh node join NAME) printed."`
	Root  string `required:"" help:"The directory declared paths land under: /etc/app/app.conf is written to ROOT/etc/app/app.conf."`
	State string `help:"Where the agent keeps what it applied and what the mesh owns (default: ROOT.state, beside the root)."`
}

func (c *AgentCmd) Run(ctx context.Context, g *Globals, out *Output) error {
	j, err := agent.ParseJoin(c.Join)
	if err != nil {
		return usagef("%v", err)
	}
	addr := busAddr{URL: j.Bus, From: "the join string"}
	if g.busNamed() {
		given, err := g.resolveBus(true)
		if err != nil {
			return err
		}
		if normalizeURL(given.URL) != normalizeURL(j.Bus) {
			return usagef("the bus is configured two ways: the join string says %s and %s says %s; give one, or make them agree", j.Bus, given.From, given.URL)
		}
	}
	log := newLogger(out.Err)
	nc, err := connect(addr, "mesh agent "+j.Node, nats.MaxReconnects(-1))
	if err != nil {
		return err
	}
	defer nc.Close()
	a, err := agent.Open(ctx, nc, agent.Config{Join: j, Root: c.Root, State: c.State, Log: log})
	if err != nil {
		return err
	}
	defer a.Close()
	log.Info(fmt.Sprintf("agent for %s in mesh %s, root %s, pinned controller key %s", j.Node, j.Mesh, c.Root, j.Key))
	return a.Run(ctx)
}

// NodeJoinCmd prints a node's join string again.
type NodeJoinCmd struct {
	Name string `arg:""`
}

func (c *NodeJoinCmd) Run(ctx context.Context, g *Globals, out *Output) error {
	cl, closeFn, err := g.client()
	if err != nil {
		return err
	}
	defer closeFn()
	var id commands.Identity
	if err := cl.Call(ctx, commands.SubjectNodeJoin, commands.NameRequest{Name: c.Name}, &id); err != nil {
		return err
	}
	fmt.Fprintln(out.Out, joinString(cl, id))
	return nil
}

// joinString is the identity with the bus this client reached it on.
func joinString(cl *commands.Client, id commands.Identity) string {
	return agent.Join{Mesh: id.Mesh, Bus: cl.NC.ConnectedUrlRedacted(), Node: id.Node, Key: id.Key}.String()
}
