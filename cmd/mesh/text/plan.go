package text

import (
	"fmt"
	"io"
	"strings"

	"github.com/meshctl/mesh/compose"
	"github.com/meshctl/mesh/manifest"
	"github.com/meshctl/mesh/wire"
)

func Plan(w io.Writer, p wire.Plan) {
	sent := "nothing has been sent to " + p.Node + " yet"
	if p.Sent != nil {
		sent = fmt.Sprintf("last sent sequence %d, digest %s", p.Sent.Sequence, Short(p.Sent.Digest))
	}
	if p.Composable {
		fmt.Fprintf(w, "plan for %s: digest %s (%s)\n", p.Node, p.Digest, sent)
	} else {
		fmt.Fprintf(w, "plan for %s: cannot be composed (%s)\n", p.Node, sent)
	}
	if p.Composable && len(p.Modules) == 0 {
		fmt.Fprintln(w, "  an empty declaration: nothing assigned that it can host; it would drop what the mesh gave it")
	}
	for _, m := range p.Modules {
		fmt.Fprintf(w, "module %s (build %s)\n", m.Module, manifest.ShortBuild(m.Build))
		for _, r := range p.Resources {
			if r.Module != m.Module {
				continue
			}
			fmt.Fprintf(w, "  %-9s %s %s\n", r.Kind, r.Path, r.Mode)
			if r.Content != nil {
				for _, line := range strings.Split(strings.TrimSuffix(*r.Content, "\n"), "\n") {
					fmt.Fprintf(w, "            | %s\n", line)
				}
			}
		}
	}
	for _, rc := range p.Chosen {
		fmt.Fprintf(w, "%s receives %s from %s on %s (%s)\n", rc.Consumer, rc.Requirement, rc.Module, rc.Node, rc.Why)
	}
	for _, l := range p.LeftOut {
		fmt.Fprintf(w, "left out: %s\n", l.Reason)
	}
	for _, u := range p.Unresolved {
		fmt.Fprintf(w, "unresolved: %s\n", u.Reason)
	}
	for _, pr := range p.Problems {
		fmt.Fprintf(w, "problem: %s\n", pr)
	}
	if p.Composable {
		Changes(w, p.Sent != nil, p.Changes)
	}
}

func Changes(w io.Writer, sent bool, changes []compose.Change) {
	switch {
	case !sent && len(changes) == 0:
		fmt.Fprintln(w, "changes: none; it has never been sent a declaration, and this one is empty")
		return
	case !sent:
		fmt.Fprintf(w, "changes: %d resource(s), all new to it (it has never been sent a declaration)\n", len(changes))
	case len(changes) == 0:
		fmt.Fprintln(w, "changes: none; it would be sent what it was last sent")
		return
	default:
		fmt.Fprintf(w, "changes against what it was last sent: %d\n", len(changes))
	}
	ChangeList(w, changes)
}

// ChangeList prints one line per changed resource, and the line diff
// of changed content under it.
func ChangeList(w io.Writer, changes []compose.Change) {
	for _, c := range changes {
		what := ""
		if len(c.What) > 0 {
			what = " (" + strings.Join(c.What, ", ") + ")"
		}
		fmt.Fprintf(w, "  %-7s %s%s\n", c.Change, c.Path, what)
		if c.Change == "changed" {
			for _, l := range c.Lines {
				fmt.Fprintf(w, "          %s\n", l)
			}
		}
	}
}

func Short(digest string) string { return manifest.ShortBuild(digest) }
