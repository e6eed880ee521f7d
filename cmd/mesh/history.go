package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/meshctl/mesh/manifest"
	"github.com/meshctl/mesh/wire"
)

// HistoryCmd shows what a node was told, when, and what it said back.
type HistoryCmd struct {
	Node  string `arg:""`
	Diff  bool   `help:"Show what changed between consecutive declarations."`
	Since string `help:"From this time: RFC 3339, or a duration ago such as 2h."`
	Until string `help:"Up to this time: RFC 3339, or a duration ago."`
	JSON  bool   `help:"Print the history as JSON."`
}

func (c *HistoryCmd) Run(ctx context.Context, g *Globals, out *Output) error {
	req := wire.HistoryRequest{Node: c.Node, Diff: c.Diff}
	var err error
	if req.Since, err = parseWhen("--since", c.Since); err != nil {
		return err
	}
	if req.Until, err = parseWhen("--until", c.Until); err != nil {
		return err
	}
	var h wire.History
	if err := g.call(ctx, wire.SubjectHistory, req, &h); err != nil {
		return err
	}
	if c.JSON {
		return printJSON(out.Out, h)
	}
	for i := range h.Entries {
		// A change's lines are the declaration's, which the controller
		// composed: they keep their tabs. The rest may be the node's.
		changes := h.Entries[i].Changes
		h.Entries[i].Changes = nil
		showable(&h.Entries[i])
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
		printEntry(w, e, c.Diff)
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

func printEntry(w io.Writer, e wire.HistoryEntry, diff bool) {
	at := e.At.UTC().Format(time.RFC3339)
	switch e.Kind {
	case "unreachable":
		fmt.Fprintf(w, "  %s  unreachable: not heard for over %s (last heard %s); what it reported before may no longer hold\n",
			at, time.Duration(e.Bound*float64(time.Second)), e.LastHeard.UTC().Format(time.RFC3339))
		return
	case "reachable":
		fmt.Fprintf(w, "  %s  reachable: heard again\n", at)
		return
	}
	if e.Kind != "declaration" {
		detail := e.Reason
		switch {
		case e.Kind == "applied" && e.Changed == 0:
			detail = "it already held all of it"
		case e.Kind == "applied":
			detail = fmt.Sprintf("%d resource(s) written or removed", e.Changed)
		case e.Kind == "drift" && e.Corrected:
			detail = "changed behind the agent's back, put back (a corrective change): " + strings.Join(e.Paths, ", ")
		case e.Kind == "drift":
			detail = "changed behind the agent's back, left as found (--drift report): " + strings.Join(e.Paths, ", ")
		case e.Kind == "interrupted":
			detail = "the agent began applying it at " + e.BeganAt.UTC().Format(time.RFC3339) +
				" and stopped part way: its files were part new, part old, until the apply after this line"
		}
		if e.Highest > 0 {
			detail += fmt.Sprintf(" (it had applied up to sequence %d)", e.Highest)
		}
		for _, f := range e.Failed {
			detail += f.Path + ": " + f.Reason + "; "
		}
		line := fmt.Sprintf("  %s  %-8s sequence %d (digest %s) %s", at, e.Kind, e.Sequence, short(e.Digest), strings.TrimSuffix(detail, "; "))
		fmt.Fprintln(w, strings.TrimRight(line, " "))
		return
	}
	var builds []string
	for _, b := range e.Builds {
		builds = append(builds, b.Module+"@"+manifest.ShortBuild(b.Build))
	}
	shown := orNone(strings.Join(builds, ", "))
	if e.BuildsUnknown {
		shown = "unknown: its signed bytes do not decode (mesh audit names why)"
	}
	fmt.Fprintf(w, "%s  sent     sequence %d by %s, %d resource(s), digest %s, event %d; builds %s\n",
		at, e.Sequence, e.By, e.Resources, short(e.Digest), e.Seq, shown)
	if !diff {
		return
	}
	if len(e.Changes) == 0 {
		fmt.Fprintln(w, "  no change from the declaration before it")
		return
	}
	printChangeList(w, e.Changes)
}

// parseWhen reads a time flag: RFC 3339, or a duration ago.
func parseWhen(flag, s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return time.Now().Add(-d), nil
	}
	return time.Time{}, usagef("%s %q is neither an RFC 3339 time (2026-12-02T14:00:00Z) nor a duration ago (2h)", flag, s)
}

// AuditCmd proves a node's record, or the whole mesh's.
type AuditCmd struct {
	Node string `arg:"" optional:"" help:"The node; without it, every node and every foreign message."`
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

func (c *AuditCmd) Run(ctx context.Context, g *Globals, out *Output) error {
	cl, closeFn, err := g.client()
	if err != nil {
		return err
	}
	defer closeFn()
	cl.Timeout = g.timeoutOr(30 * time.Minute)
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
		if err := printJSON(out.Out, a); err != nil {
			return err
		}
	} else {
		showable(&a)
		printAudit(out.Out, a, c.Node == "")
	}
	if !a.OK {
		return exitError{code: 1, err: auditFailure(a)}
	}
	return nil
}

func printAudit(w io.Writer, a wire.AuditReport, mesh bool) {
	for _, n := range a.Nodes {
		status := "holds"
		if !n.OK {
			status = "BREAKS at " + n.Break
		}
		fmt.Fprintf(w, "%s: %d declaration(s) against %d controller key(s), %d report(s) against %d report key(s): %s\n",
			n.Node, n.Declarations, len(n.Keys), n.Reports, len(n.ReportKeys), status)
		switch {
		case n.OwnKeys && len(n.Rekeys) > 0:
			fmt.Fprintf(w, "  its keys are its own, made on its machine; re-keyed by an operator at event(s) %s\n", joinSeqs(n.Rekeys))
		case !n.OwnKeys && n.Reports > 0:
			fmt.Fprintf(w, "  its keys derive from the controller key (enrolled before nodes made their own): mesh node rekey %s\n", n.Node)
		}
		if !mesh {
			for _, f := range n.Foreign {
				fmt.Fprintf(w, "  foreign event %d on %s: %s\n", f.Seq, f.Subject, f.Reason)
			}
		}
	}
	if mesh {
		for _, f := range a.Foreign {
			ack := ""
			if f.Acked != 0 {
				ack = fmt.Sprintf(" (acknowledged at event %d)", f.Acked)
			}
			fmt.Fprintf(w, "foreign event %d on %s: %s%s\n", f.Seq, f.Subject, f.Reason, ack)
		}
		fmt.Fprintf(w, "read %d event(s) in %.3fs: %.0f events/s (this machine checks %.0f bare ed25519 signatures/s)\n",
			a.Events, a.Seconds, a.Rate, a.SignatureRate)
	}
	if a.OK {
		fmt.Fprintln(w, "the record holds")
	}
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

func joinSeqs(seqs []uint64) string {
	parts := make([]string, len(seqs))
	for i, s := range seqs {
		parts[i] = strconv.FormatUint(s, 10)
	}
	return strings.Join(parts, ", ")
}
