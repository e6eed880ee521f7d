package cmdline

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"

	"github.com/meshctl/mesh/client"
	"github.com/meshctl/mesh/wire"
)

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

// InBatches sends n items as requests of at most wire.MaxBatch, each
// all or nothing, saying progress on a terminal. send does one batch. When
// a batch fails, the batches before it stay done, and the error says so.
func InBatches(ctx context.Context, out *Output, n int, verb string, send func(ctx context.Context, from, to int) (wire.BatchReply, error)) (Batched, error) {
	tty := IsTerminal(out.Err)
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

// EnrollBatches enrolls list a batch at a time (mesh node enroll --from,
// mesh fleet).
func EnrollBatches(ctx context.Context, cl *client.Client, out *Output, list []wire.EnrollRequest) (Batched, error) {
	return InBatches(ctx, out, len(list), "enrolled", func(ctx context.Context, from, to int) (wire.BatchReply, error) {
		var r wire.BatchReply
		err := cl.Call(ctx, wire.SubjectNodeEnrollBatch, wire.EnrollBatchRequest{CommandID: wire.NewCommandID(), Nodes: list[from:to]}, &r)
		return r, err
	})
}

// AssignBatches assigns module to nodes a batch at a time (mesh assign
// --selector and --from, mesh fleet), and answers the build assigned.
func AssignBatches(ctx context.Context, cl *client.Client, out *Output, as wire.AssignBatchRequest, nodes []string) (Batched, error) {
	return InBatches(ctx, out, len(nodes), "assigned to", func(ctx context.Context, from, to int) (wire.BatchReply, error) {
		var r wire.BatchReply
		req := as
		req.CommandID, req.Nodes = wire.NewCommandID(), nodes[from:to]
		err := cl.Call(ctx, wire.SubjectNodeAssignBatch, req, &r)
		return r, err
	})
}

// IsTerminal says whether w is a terminal, where progress may be drawn
// over itself rather than printed line by line.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	info, err := f.Stat()
	return err == nil && info.Mode()&os.ModeCharDevice != 0
}
