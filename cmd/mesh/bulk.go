package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/meshctl/mesh/cmd/mesh/cmdline"
	"github.com/meshctl/mesh/cmd/mesh/text"
	"github.com/meshctl/mesh/wire"
)

// A node list (mesh node enroll --from, mesh assign --from) is one node a
// line: its name, then, for enrolment, its capabilities and labels, all
// separated by spaces or tabs. A word with '=' is a label KEY=VALUE; any
// other is a capability (several may be joined with commas). Blank lines
// and lines starting with '#' are skipped. A line holding only a name is a
// node with neither:
//
//	web-1 linux zone=eu-1 tier=web
//	web-2 linux,arm64 zone=eu-2
//	spare-1

// readNodeList parses a node list; names is true where only names are
// allowed (assign). A line that cannot be read refuses the whole list,
// naming its line, before anything is sent.
func readNodeList(path string, namesOnly bool) ([]wire.EnrollRequest, error) {
	var r io.Reader
	if path == "-" {
		r = os.Stdin
	} else {
		f, err := os.Open(path)
		if err != nil {
			return nil, cmdline.Usagef("cannot read the node list %s: %v", path, err)
		}
		defer f.Close()
		r = f
	}
	var out []wire.EnrollRequest
	where := map[string]int{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for line := 1; sc.Scan(); line++ {
		words := strings.Fields(sc.Text())
		if len(words) == 0 || strings.HasPrefix(words[0], "#") {
			continue
		}
		n := wire.EnrollRequest{Name: words[0], Labels: map[string]string{}}
		if first, dup := where[n.Name]; dup {
			return nil, cmdline.Usagef("%s line %d: node %s is listed again (first on line %d); list each node once", path, line, n.Name, first)
		}
		where[n.Name] = line
		if namesOnly && len(words) > 1 {
			return nil, cmdline.Usagef("%s line %d: a list of nodes to assign to holds one name a line, and this line holds %d words", path, line, len(words))
		}
		for _, w := range words[1:] {
			if k, v, ok := strings.Cut(w, "="); ok {
				if k == "" {
					return nil, cmdline.Usagef("%s line %d: %q is not a label KEY=VALUE", path, line, w)
				}
				n.Labels[k] = v
				continue
			}
			for c := range strings.SplitSeq(w, ",") {
				if c != "" {
					n.Capabilities = append(n.Capabilities, c)
				}
			}
		}
		out = append(out, n)
	}
	if err := sc.Err(); err != nil {
		return nil, cmdline.Usagef("cannot read the node list %s: %v", path, err)
	}
	if len(out) == 0 {
		return nil, cmdline.Usagef("the node list %s names no node; write one name a line", path)
	}
	return out, nil
}

// enrollFrom is mesh node enroll --from.
func (c *NodeEnrollCmd) enrollFrom(ctx context.Context, g *cmdline.Globals, out *cmdline.Output) error {
	list, err := readNodeList(c.From, false)
	if err != nil {
		return err
	}
	cl, closeFn, err := g.Client()
	if err != nil {
		return err
	}
	defer closeFn()
	did, err := cmdline.EnrollBatches(ctx, cl, out, list)
	if err != nil {
		return err
	}
	if c.JSON {
		// No join strings: a thousand secrets in one answer would be
		// printed where one is needed; mesh node join NAME --json gives each.
		return text.JSON(out.Out, did)
	}
	fmt.Fprintf(out.Out, "enrolled %d node(s) from %s; %d were already enrolled as listed (nothing to do)\n", len(did.Changed), c.From, len(did.Unchanged))
	fmt.Fprintln(out.Out, "each node's join string: mesh node join NAME")
	return nil
}

// assignMany is mesh assign --selector and --from.
func (c *AssignCmd) assignMany(ctx context.Context, g *cmdline.Globals, out *cmdline.Output) error {
	if c.Selector != "" && c.From != "" {
		return cmdline.Usagef("give --selector or --from, not both")
	}
	module := c.Node // with a selector or a list, the one argument is the module
	if c.Module != "" || module == "" {
		return cmdline.Usagef("with --selector or --from, name only the module: mesh assign --selector zone=eu-1 MODULE")
	}
	cl, closeFn, err := g.Client()
	if err != nil {
		return err
	}
	defer closeFn()
	var names []string
	from := c.From
	if c.Selector != "" {
		var sel wire.Selected
		if err := cl.Call(ctx, wire.SubjectNodeSelect, wire.SelectRequest{Selector: c.Selector}, &sel); err != nil {
			return err
		}
		if len(sel.Nodes) == 0 {
			return fmt.Errorf("no active node matches the selector %s; nothing was assigned; see mesh node list", c.Selector)
		}
		names, from = sel.Nodes, "the selector "+c.Selector
	} else {
		list, err := readNodeList(c.From, true)
		if err != nil {
			return err
		}
		for _, n := range list {
			names = append(names, n.Name)
		}
	}
	did, err := cmdline.AssignBatches(ctx, cl, out, wire.AssignBatchRequest{Module: module, Settings: c.Set, Unset: c.Unset, Reset: c.Reset, Build: c.Build, Policy: c.Policy}, names)
	if err != nil {
		return err
	}
	if c.JSON {
		did.Module = module
		return text.JSON(out.Out, did)
	}
	fmt.Fprintf(out.Out, "assigned %s (build %s) to %d node(s) of %s; %d already had it with these settings (nothing to do)\n",
		module, text.Short(did.Build), len(did.Changed), from, len(did.Unchanged))
	return nil
}
