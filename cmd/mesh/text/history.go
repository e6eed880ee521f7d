package text

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/meshctl/mesh/manifest"
	"github.com/meshctl/mesh/wire"
)

func Entry(w io.Writer, e wire.HistoryEntry, diff bool) {
	at := Time(e.At)
	switch e.Kind {
	case "unreachable":
		fmt.Fprintf(w, "  %s  unreachable: not heard for over %s (last heard %s); what it reported before may no longer hold\n",
			at, time.Duration(e.Bound*float64(time.Second)), Time(e.LastHeard))
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
			detail = "the agent began applying it at " + Time(e.BeganAt) +
				" and stopped part way: its files were part new, part old, until the apply after this line"
		}
		if e.Highest > 0 {
			detail += fmt.Sprintf(" (it had applied up to sequence %d)", e.Highest)
		}
		for _, f := range e.Failed {
			detail += f.Path + ": " + f.Reason + "; "
		}
		line := fmt.Sprintf("  %s  %-8s sequence %d (digest %s) %s", at, e.Kind, e.Sequence, Short(e.Digest), strings.TrimSuffix(detail, "; "))
		fmt.Fprintln(w, strings.TrimRight(line, " "))
		return
	}
	var builds []string
	for _, b := range e.Builds {
		builds = append(builds, b.Module+"@"+manifest.ShortBuild(b.Build))
	}
	shown := OrNone(strings.Join(builds, ", "))
	if e.BuildsUnknown {
		shown = "unknown: its signed bytes do not decode (mesh audit names why)"
	}
	fmt.Fprintf(w, "%s  sent     sequence %d by %s, %d resource(s), digest %s, event %d; builds %s\n",
		at, e.Sequence, Asked(e.By, e.Operator), e.Resources, Short(e.Digest), e.Seq, shown)
	if !diff {
		return
	}
	if len(e.Changes) == 0 {
		fmt.Fprintln(w, "  no change from the declaration before it")
		return
	}
	ChangeList(w, e.Changes)
}

func Audit(w io.Writer, a wire.AuditReport, mesh bool) {
	for _, n := range a.Nodes {
		status := "holds"
		if !n.OK {
			status = "BREAKS at " + n.Break
		}
		fmt.Fprintf(w, "%s: %d declaration(s) against %d controller key(s), %d report(s) against %d report key(s): %s\n",
			n.Node, n.Declarations, len(n.Keys), n.Reports, len(n.ReportKeys), status)
		if len(n.AskedBy) > 0 {
			var who []string
			for _, name := range slices.Sorted(maps.Keys(n.AskedBy)) {
				who = append(who, fmt.Sprintf("%s %d", name, n.AskedBy[name]))
			}
			fmt.Fprintf(w, "  its declarations were asked for by: %s\n", strings.Join(who, ", "))
		}
		switch {
		case n.OwnKeys && len(n.Rekeys) > 0:
			fmt.Fprintf(w, "  its keys are its own, made on its machine; re-keyed by an operator at event(s) %s\n", JoinSeqs(n.Rekeys))
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

func JoinSeqs(seqs []uint64) string {
	parts := make([]string, len(seqs))
	for i, s := range seqs {
		parts[i] = strconv.FormatUint(s, 10)
	}
	return strings.Join(parts, ", ")
}

// Asked is how a send was made and who asked for it (issue 33): "push,
// asked by ci"; the one word when they are the same actor (the
// reconciler, a rollout's own wave) or nobody is named (an open bus, a
// send from before operators had names).
func Asked(by, operator string) string {
	if operator == "" || operator == by {
		return by
	}
	return by + ", asked by " + operator
}
