package main

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/meshctl/mesh/client"
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
			return nil, usagef("cannot read the node list %s: %v", path, err)
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
			return nil, usagef("%s line %d: node %s is listed again (first on line %d); list each node once", path, line, n.Name, first)
		}
		where[n.Name] = line
		if namesOnly && len(words) > 1 {
			return nil, usagef("%s line %d: a list of nodes to assign to holds one name a line, and this line holds %d words", path, line, len(words))
		}
		for _, w := range words[1:] {
			if k, v, ok := strings.Cut(w, "="); ok {
				if k == "" {
					return nil, usagef("%s line %d: %q is not a label KEY=VALUE", path, line, w)
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
		return nil, usagef("cannot read the node list %s: %v", path, err)
	}
	if len(out) == 0 {
		return nil, usagef("the node list %s names no node; write one name a line", path)
	}
	return out, nil
}

// Batched is what a bulk verb did, batch by batch, and its --json answer:
// the nodes it changed and those that needed nothing, the event each batch
// that changed something appended (seqs), and the build an assignment gave.
type Batched struct {
	Module    string   `json:"module,omitempty"`
	Build     string   `json:"build,omitempty"`
	Changed   []string `json:"changed"`
	Unchanged []string `json:"unchanged"`
	Seqs      []uint64 `json:"seqs"`
}

// inBatches sends n items as requests of at most wire.MaxBatch, each
// all or nothing, saying progress on a terminal. send does one batch. When
// a batch fails, the batches before it stay done, and the error says so.
func inBatches(ctx context.Context, out *Output, n int, verb string, send func(ctx context.Context, from, to int) (wire.BatchReply, error)) (Batched, error) {
	tty := isTerminal(out.Err)
	batches := (n + wire.MaxBatch - 1) / wire.MaxBatch
	did := Batched{Changed: []string{}, Unchanged: []string{}, Seqs: []uint64{}}
	for b := range batches {
		from, to := b*wire.MaxBatch, min((b+1)*wire.MaxBatch, n)
		r, err := send(ctx, from, to)
		if err != nil {
			if tty {
				fmt.Fprintln(out.Err)
			}
			done := ""
			if b > 0 {
				done = fmt.Sprintf("; the %d batch(es) before it stay done (%d node(s) %s); give the same list again once it is fixed: what is done is nothing to do", b, len(did.Changed), verb)
			}
			return did, fmt.Errorf("batch %d of %d (list entries %d to %d) was refused whole, nothing of it recorded%s: %w", b+1, batches, from+1, to, done, err)
		}
		did.Changed, did.Unchanged = append(did.Changed, r.Changed...), append(did.Unchanged, r.Unchanged...)
		if len(r.Changed) > 0 && r.Seq > 0 {
			did.Seqs = append(did.Seqs, r.Seq)
		}
		did.Build = cmp.Or(r.Build, did.Build)
		if tty {
			fmt.Fprintf(out.Err, "\r%s %d of %d node(s)\x1b[K", verb, to, n)
		}
	}
	if tty {
		fmt.Fprintln(out.Err)
	}
	return did, nil
}

// enrollFrom is mesh node enroll --from.
func (c *NodeEnrollCmd) enrollFrom(ctx context.Context, g *Globals, out *Output) error {
	list, err := readNodeList(c.From, false)
	if err != nil {
		return err
	}
	cl, closeFn, err := g.client()
	if err != nil {
		return err
	}
	defer closeFn()
	did, err := enrollBatches(ctx, cl, out, list)
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
func (c *AssignCmd) assignMany(ctx context.Context, g *Globals, out *Output) error {
	if c.Selector != "" && c.From != "" {
		return usagef("give --selector or --from, not both")
	}
	module := c.Node // with a selector or a list, the one argument is the module
	if c.Module != "" || module == "" {
		return usagef("with --selector or --from, name only the module: mesh assign --selector zone=eu-1 MODULE")
	}
	cl, closeFn, err := g.client()
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
	did, err := assignBatches(ctx, cl, out, wire.AssignBatchRequest{Module: module, Settings: c.Set, Unset: c.Unset, Reset: c.Reset, Build: c.Build, Policy: c.Policy}, names)
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

// enrollBatches enrolls list a batch at a time (mesh node enroll --from,
// mesh fleet).
func enrollBatches(ctx context.Context, cl *client.Client, out *Output, list []wire.EnrollRequest) (Batched, error) {
	return inBatches(ctx, out, len(list), "enrolled", func(ctx context.Context, from, to int) (wire.BatchReply, error) {
		var r wire.BatchReply
		err := cl.Call(ctx, wire.SubjectNodeEnrollBatch, wire.EnrollBatchRequest{CommandID: wire.NewCommandID(), Nodes: list[from:to]}, &r)
		return r, err
	})
}

// assignBatches assigns module to nodes a batch at a time (mesh assign
// --selector and --from, mesh fleet), and answers the build assigned.
func assignBatches(ctx context.Context, cl *client.Client, out *Output, as wire.AssignBatchRequest, nodes []string) (Batched, error) {
	return inBatches(ctx, out, len(nodes), "assigned to", func(ctx context.Context, from, to int) (wire.BatchReply, error) {
		var r wire.BatchReply
		req := as
		req.CommandID, req.Nodes = wire.NewCommandID(), nodes[from:to]
		err := cl.Call(ctx, wire.SubjectNodeAssignBatch, req, &r)
		return r, err
	})
}
