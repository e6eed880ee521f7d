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

// HistoryCmd shows what a node was told, when, and what it said back.
type HistoryCmd struct {
	Node  string `arg:"" predictor:"node"`
	Diff  bool   `help:"Show what changed between consecutive declarations."`
	Since string `help:"From this time: RFC 3339, or a duration ago such as 2h."`
	Until string `help:"Up to this time: RFC 3339, or a duration ago."`
	JSON  bool   `help:"Print the history as JSON."`
}

func (c *HistoryCmd) Run(ctx context.Context, g *cmdline.Globals, out *cmdline.Output) error {
	req := wire.HistoryRequest{Node: c.Node, Diff: c.Diff}
	var err error
	if req.Since, err = parseWhen("--since", c.Since); err != nil {
		return err
	}
	if req.Until, err = parseWhen("--until", c.Until); err != nil {
		return err
	}
	var h wire.History
	if err := g.Call(ctx, wire.SubjectHistory, req, &h); err != nil {
		return err
	}
	if c.JSON {
		return text.JSON(out.Out, h)
	}
	for i := range h.Entries {
		// A change's lines are the declaration's, which the controller
		// composed: they keep their tabs. The rest may be the node's.
		changes := h.Entries[i].Changes
		h.Entries[i].Changes = nil
		text.Showable(&h.Entries[i])
		h.Entries[i].Changes = changes
	}
	if len(h.Entries) == 0 {
		fmt.Fprintf(out.Out, "%s has been sent nothing and has reported nothing in that time\n", h.Node)
		return nil
	}
	// Buffered: a node's history of thousands of entries, a write a line
	// to a terminal, cost more than the answer did.
	w := bufio.NewWriterSize(out.Out, 64<<10)
	defer w.Flush()
	declarations, liveness := 0, 0
	for _, e := range h.Entries {
		text.Entry(w, e, c.Diff)
		switch e.Kind {
		case "declaration":
			declarations++
		case "unreachable", "reachable":
			liveness++
		}
	}
	fmt.Fprintf(w, "%d declaration(s), %d report(s)", declarations, len(h.Entries)-declarations-liveness)
	if liveness > 0 {
		fmt.Fprintf(w, ", %d change(s) of whether it was heard", liveness)
	}
	fmt.Fprintln(w)
	return nil
}

// parseWhen reads a time flag: RFC 3339, or a duration ago.
func parseWhen(flag, s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	// UTC either way: the answer echoes the moment asked (as_of), and
	// scripts are promised every time in UTC.
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t.UTC(), nil
	}
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return time.Now().Add(-d).UTC(), nil
	}
	return time.Time{}, cmdline.Usagef("%s %q is neither an RFC 3339 time (2026-12-02T14:00:00Z) nor a duration ago (2h)", flag, s)
}

// AuditCmd proves a node's record, or the whole mesh's.
type AuditCmd struct {
	Node string `arg:"" predictor:"node" optional:"" help:"The node; without it, every node and every foreign message."`
	JSON bool   `help:"Print the audit as JSON."`
}

func (c *AuditCmd) Help() string {
	return `Reads the log and proves both directions (rule 20): every declaration a node was told verifies
against the controller key in force, chains and rises; every report it sent back verifies against
the report key only its agent holds. Names every foreign message (rule 19). Exit 0 only when
everything holds, 1 when something does not.

Examples:
  mesh audit
  mesh audit web-1 --json`
}

func (c *AuditCmd) Run(ctx context.Context, g *cmdline.Globals, out *cmdline.Output) error {
	cl, closeFn, err := g.Client()
	if err != nil {
		return err
	}
	defer closeFn()
	cl.Timeout = g.TimeoutOr(30 * time.Minute)
	var a wire.AuditReport
	req := wire.AuditRequest{Node: c.Node}
	if c.Node == "" {
		fr, done, err := followProgress(cl, out, "checked", "event(s)", false)
		if err != nil {
			return err
		}
		defer done()
		req.Progress = fr.Progress
	}
	if err := cl.Call(ctx, wire.SubjectAudit, req, &a); err != nil {
		return err
	}
	if c.JSON {
		if err := text.JSON(out.Out, a); err != nil {
			return err
		}
	} else {
		text.Showable(&a)
		text.Audit(out.Out, a, c.Node == "")
	}
	if !a.OK {
		return cmdline.ExitError{Code: 1, Err: auditFailure(a)}
	}
	return nil
}

// auditFailure is the one sentence that says what does not hold.
func auditFailure(a wire.AuditReport) error {
	broken := 0
	for _, n := range a.Nodes {
		if !n.OK {
			broken++
		}
	}
	foreign := len(a.Foreign)
	if foreign == 0 {
		for _, n := range a.Nodes {
			foreign += len(n.Foreign)
		}
	}
	return fmt.Errorf("the record does not hold: %d node record(s) break, %d foreign message(s); each is named above", broken, foreign)
}
