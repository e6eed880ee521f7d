package main

import (
	"bufio"
	"context"
	"fmt"
	"time"

	"github.com/meshctl/mesh/cmd/mesh/cmdline"
	"github.com/meshctl/mesh/cmd/mesh/text"
	"github.com/meshctl/mesh/wire"
)

// NetworkCmd groups the overlay network's verbs (issue 18).
type NetworkCmd struct {
	Set     NetworkSetCmd     `cmd:"" help:"Set the overlay's range; every active node without an address is given one from it."`
	Show    NetworkShowCmd    `cmd:"" help:"The overlay's range and every address in use or quarantined."`
	Address NetworkAddressCmd `cmd:"" help:"Give a node the address it asks for (its old one is quarantined)."`
}

type NetworkSetCmd struct {
	CIDR       string        `arg:"" help:"The range, such as 10.42.0.0/16 or fd00:42::/64."`
	Quarantine time.Duration `default:"24h" help:"How long an address given back waits before it is given again."`
	JSON       bool          `help:"Print the network as JSON."`
}

func (c *NetworkSetCmd) Help() string {
	return "Examples:\n  mesh network set 10.42.0.0/16\n  mesh network set 10.42.0.0/15   (a wider range keeps every address given)\n\n" +
		"A range that leaves out an address in use is refused, naming the node that holds it."
}

func (c *NetworkSetCmd) Run(ctx context.Context, g *cmdline.Globals, out *cmdline.Output) error {
	var r wire.NetworkView
	if err := g.Call(ctx, wire.SubjectNetworkSet, wire.NetworkRequest{CommandID: wire.NewCommandID(), CIDR: c.CIDR, Quarantine: c.Quarantine}, &r); err != nil {
		return err
	}
	if c.JSON {
		return text.JSON(out.Out, r)
	}
	switch {
	case !r.Changed && r.Allotted == 0:
		fmt.Fprintf(out.Out, "the network is already %s and every active node has an address; nothing to do\n", r.CIDR)
	case r.Changed:
		fmt.Fprintf(out.Out, "the network is %s (an address given back waits %s); %d node(s) given an address, at sequence %d\n",
			r.CIDR, time.Duration(r.QuarantineSeconds)*time.Second, r.Allotted, r.Seq)
	default:
		fmt.Fprintf(out.Out, "the network stays %s; %d node(s) without an address given one, at sequence %d\n", r.CIDR, r.Allotted, r.Seq)
	}
	return nil
}

type NetworkShowCmd struct {
	JSON bool `help:"Print the network as JSON."`
}

func (c *NetworkShowCmd) Help() string { return "Examples:\n  mesh network show" }

func (c *NetworkShowCmd) Run(ctx context.Context, g *cmdline.Globals, out *cmdline.Output) error {
	var r wire.NetworkView
	if err := g.Call(ctx, wire.SubjectNetworkShow, wire.Empty{}, &r); err != nil {
		return err
	}
	if c.JSON {
		return text.JSON(out.Out, r)
	}
	if r.CIDR == "" {
		fmt.Fprintln(out.Out, "no network yet; set its range with mesh network set CIDR")
		return nil
	}
	w := bufio.NewWriter(out.Out)
	defer w.Flush()
	held, quarantined := 0, 0
	for _, a := range r.Addresses {
		switch {
		case a.Node != "" && a.Fixed:
			held++
			fmt.Fprintf(w, "%s  %s (fixed)\n", a.Address, a.Node)
		case a.Node != "":
			held++
			fmt.Fprintf(w, "%s  %s\n", a.Address, a.Node)
		default:
			quarantined++
			fmt.Fprintf(w, "%s  given back %s\n", a.Address, text.Time(a.Released))
		}
	}
	fmt.Fprintf(w, "network %s: %d address(es) held, %d given back (each waits %s before it is given again)\n",
		r.CIDR, held, quarantined, time.Duration(r.QuarantineSeconds)*time.Second)
	return nil
}

type NetworkAddressCmd struct {
	Node    string `arg:"" predictor:"node"`
	Address string `arg:""`
	JSON    bool   `help:"Print the network as it stands after, as JSON (changed: false when there was nothing to do; seq the event)."`
}

func (c *NetworkAddressCmd) Help() string { return "Examples:\n  mesh network address db-1 10.42.0.10" }

func (c *NetworkAddressCmd) Run(ctx context.Context, g *cmdline.Globals, out *cmdline.Output) error {
	var r wire.NetworkView
	if err := g.Call(ctx, wire.SubjectNetworkAddress, wire.AddressRequest{CommandID: wire.NewCommandID(), Node: c.Node, Address: c.Address}, &r); err != nil {
		return err
	}
	if c.JSON {
		r.Addresses = cmdline.NonNil(r.Addresses)
		return text.JSON(out.Out, r)
	}
	if !r.Changed {
		fmt.Fprintf(out.Out, "%s already has %s; nothing to do\n", c.Node, c.Address)
		return nil
	}
	fmt.Fprintf(out.Out, "%s has %s from now on, at sequence %d; a push sends it and its peers\n", c.Node, c.Address, r.Seq)
	return nil
}
