package text

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/meshctl/mesh/manifest"
	"github.com/meshctl/mesh/wire"
)

func SettingsNote(s map[string]string) string {
	if len(s) == 0 {
		return ""
	}
	return " with " + Labels(s)
}

func State(n wire.NodeView) string {
	switch {
	case n.Retired && n.RetiredAt != nil:
		return "retired since " + Time(*n.RetiredAt)
	case n.Retired:
		return "retired"
	case n.UnreachableSince != nil:
		return "unreachable since " + Time(*n.UnreachableSince)
	}
	return "enrolled"
}

// Heard says when the controller last heard a node's agent.
func Heard(n wire.NodeView) string {
	if n.LastHeard == nil {
		return "-"
	}
	return time.Since(*n.LastHeard).Round(time.Second).String() + " ago"
}

func Labels(m map[string]string) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, k+"="+m[k])
	}
	return strings.Join(parts, ",")
}

func OrNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func OrDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func JSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// JSONLine prints v as one line of JSON: what a watch prints at each turn,
// so a script reads JSON lines.
func JSONLine(w io.Writer, v any) error { return json.NewEncoder(w).Encode(v) }

// Node prints node show's answer, one line a fact, aligned.
func Node(w io.Writer, n wire.NodeView) error {
	if n.AsOf != nil {
		fmt.Fprintf(w, "THE PAST: %s as of %s, not as it is now\n", n.Name, Time(*n.AsOf))
	}
	for _, c := range n.Causes {
		fmt.Fprintf(w, "NOT WELL: %s\n", c)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "node\t%s\n", n.Name)
	if n.State != "" {
		detail := ""
		if n.Detail != "" {
			detail = ": " + n.Detail
		}
		fmt.Fprintf(tw, "state\t%s since %s%s\n", n.State, Time(*n.Since), detail)
	} else {
		fmt.Fprintf(tw, "state\t%s\n", State(n))
	}
	if n.AsOf == nil && !n.Retired {
		fmt.Fprintf(tw, "last heard\t%s\n", Heard(n))
	}
	fmt.Fprintf(tw, "capabilities\t%s\n", OrNone(strings.Join(n.Capabilities, ", ")))
	fmt.Fprintf(tw, "labels\t%s\n", OrNone(Labels(n.Labels)))
	if n.Address != "" {
		fmt.Fprintf(tw, "address\t%s (the overlay's)\n", n.Address)
	}
	fmt.Fprintf(tw, "enrolled\t%s (sequence %d)\n", Time(n.EnrolledAt), n.EnrolledSeq)
	if n.RetiredAt != nil {
		fmt.Fprintf(tw, "retired\t%s\n", Time(*n.RetiredAt))
	}
	if len(n.Assignments) == 0 {
		fmt.Fprintf(tw, "modules\tnone assigned\n")
	}
	for _, a := range n.Assignments {
		note := ""
		if a.Latest != a.Build {
			note = fmt.Sprintf(" (the catalogue's latest is %s: a rollout or mesh assign %s %s moves it)", manifest.ShortBuild(a.Latest), n.Name, a.Module)
		}
		fmt.Fprintf(tw, "module\t%s build %s, policy %s%s%s\n", a.Module, manifest.ShortBuild(a.Build), a.Policy, SettingsNote(a.Settings), note)
	}
	if s := n.LastSent; s != nil {
		fmt.Fprintf(tw, "last sent\tsequence %d by %s, %d resource(s), digest %s, %s\n", s.Sequence, Asked(s.By, s.Operator), s.Resources, Short(s.Digest), Time(s.At))
	} else {
		fmt.Fprintf(tw, "last sent\tnothing yet\n")
	}
	if r := n.LastReport; r != nil {
		detail := ""
		if r.Reason != "" {
			detail = ": " + r.Reason
		}
		for _, f := range r.Failed {
			detail += fmt.Sprintf("; %s: %s", f.Path, f.Reason)
		}
		fmt.Fprintf(tw, "last report\t%s sequence %d (digest %s), %s%s\n", r.Outcome, r.Sequence, Short(r.Digest), Time(r.At), detail)
	} else {
		fmt.Fprintf(tw, "last report\tnone yet\n")
	}
	if n.WouldSend != "" {
		sent := "nothing"
		if n.LastSent != nil {
			sent = Short(n.LastSent.ContentDigest)
		}
		fmt.Fprintf(tw, "content\twould send %s, was sent %s\n", Short(n.WouldSend), sent)
	}
	for _, l := range n.LeftOut {
		fmt.Fprintf(tw, "left out\t%s\n", l.Reason)
	}
	for _, u := range n.Unresolved {
		fmt.Fprintf(tw, "unresolved\t%s\n", u.Reason)
	}
	for _, c := range n.Chosen {
		fmt.Fprintf(tw, "receives\t%s from %s on %s, for %s (%s)\n", c.Requirement, c.Module, c.Node, c.Consumer, c.Why)
	}
	for _, st := range n.Standings {
		fmt.Fprintf(tw, "standing\t%s on %s failing %s since %s: %s\n", st.Provider, st.Machine, st.Consumer, Time(st.Since), st.Word)
	}
	if len(n.Facts) > 0 {
		fmt.Fprintf(tw, "facts\t%s\n", Labels(n.Facts))
		fmt.Fprintf(tw, "detected\t%s (capabilities its agent found, beside those declared)\n", OrNone(strings.Join(n.Detected, ", ")))
	}
	for _, rt := range n.Runtimes {
		fmt.Fprintf(tw, "runs\t%s %s since %s: %s%s%s\n", rt.Module, rt.State, Time(rt.Since), rt.Detail, ArtifactNote(rt), HealthNote(rt))
	}
	fmt.Fprintf(tw, "version\t%d\n", n.Version)
	return tw.Flush()
}
