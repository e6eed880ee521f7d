package compose

import (
	"fmt"
	"slices"
	"strings"
)

// Change is how one resource differs between what a node was sent and what
// it would be sent now.
type Change struct {
	Path   string   `json:"path"`
	Change string   `json:"change"` // "added", "removed", "changed"
	Module string   `json:"module"`
	What   []string `json:"what,omitempty"`  // for "changed": "mode 0644 -> 0600", "content", ...
	Lines  []string `json:"lines,omitempty"` // a line diff of the content: "+ new", "- old", "  same"
}

// Diff lists the resources added, removed and changed from old to new, by
// path. A nil old is a node never sent anything: every resource is added.
func Diff(old, new *Declaration) []Change {
	before := map[string]Resource{}
	if old != nil {
		for _, r := range old.Resources {
			before[r.Path] = r
		}
	}
	changes := []Change{}
	seen := map[string]bool{}
	if new != nil {
		for _, r := range new.Resources {
			seen[r.Path] = true
			o, had := before[r.Path]
			if !had {
				c := Change{Path: r.Path, Change: "added", Module: r.Module, Lines: LineDiff("", text(r.Content))}
				if r.Sealed != nil {
					c.What = []string{"sealed"}
				}
				if r.Digest != "" {
					c.What = []string{artifactBytes(r)}
				}
				changes = append(changes, c)
				continue
			}
			if c, differs := compare(o, r); differs {
				changes = append(changes, c)
			}
		}
	}
	if old != nil {
		for _, r := range old.Resources {
			if !seen[r.Path] {
				changes = append(changes, Change{Path: r.Path, Change: "removed", Module: r.Module})
			}
		}
	}
	changes = append(changes, diffRuns(old, new)...)
	sortChanges(changes)
	return changes
}

// diffRuns lists the programs added, removed and changed, each as a change
// of the path "(run of MODULE)", which no file can have.
func diffRuns(old, new *Declaration) []Change {
	runs := func(d *Declaration) map[string]Runtime {
		m := map[string]Runtime{}
		if d != nil {
			for _, r := range d.Runs {
				m[r.Module] = r
			}
		}
		return m
	}
	before, after := runs(old), runs(new)
	var out []Change
	for mod, n := range after {
		o, had := before[mod]
		c := Change{Path: "(run of " + mod + ")", Change: "changed", Module: mod}
		switch {
		case !had:
			c.Change = "added"
		default:
			for _, d := range []struct {
				what     string
				from, to any
			}{{"command", o.Command, n.Command}, {"args", o.Args, n.Args}, {"env", o.Env, n.Env}, {"dir", o.Dir, n.Dir}, {"user", o.User, n.User}, {"health", o.Health, n.Health},
				{"artifact", o.Digest, n.Digest}} {
				if fmt.Sprint(d.from) != fmt.Sprint(d.to) {
					c.What = append(c.What, fmt.Sprintf("%s %v -> %v", d.what, d.from, d.to))
				}
			}
			if len(c.What) == 0 {
				continue
			}
		}
		out = append(out, c)
	}
	for mod := range before {
		if _, kept := after[mod]; !kept {
			out = append(out, Change{Path: "(run of " + mod + ")", Change: "removed", Module: mod})
		}
	}
	return out
}

func compare(o, n Resource) (Change, bool) {
	c := Change{Path: n.Path, Change: "changed", Module: n.Module}
	if o.Kind != n.Kind {
		c.What = append(c.What, "kind "+o.Kind+" -> "+n.Kind)
	}
	if o.Mode != n.Mode {
		c.What = append(c.What, "mode "+o.Mode+" -> "+n.Mode)
	}
	if o.Module != n.Module {
		c.What = append(c.What, "module "+o.Module+" -> "+n.Module)
	}
	switch {
	case o.Sealed != nil || n.Sealed != nil:
		// Sealed content is never shown: that it changed is all anyone
		// but its node may learn, from the keyed digests (rule 21).
		if mac(o) != mac(n) {
			c.What = append(c.What, "sealed content")
		}
	case o.Digest != n.Digest:
		// An artifact's bytes are never shown: which bytes, by digest and
		// size, is what a person checks against mesh artifact list.
		c.What = append(c.What, artifactBytes(o)+" -> "+artifactBytes(n))
	case text(o.Content) != text(n.Content):
		c.What = append(c.What, "content")
		c.Lines = LineDiff(text(o.Content), text(n.Content))
	}
	return c, len(c.What) > 0
}

// artifactBytes says which bytes an artifact resource installs:
// "artifact tool sha256 0a1b2c3d4e5f (3,300 bytes)"; "" for another kind.
func artifactBytes(r Resource) string {
	if r.Digest == "" {
		return ""
	}
	return fmt.Sprintf("artifact %s sha256 %s (%d bytes)", r.Artifact, r.Digest, r.Size)
}

// mac is a resource's keyed content digest, "" when it is not sealed.
func mac(r Resource) string {
	if r.Sealed == nil {
		return ""
	}
	return r.Sealed.MAC
}

func text(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func sortChanges(cs []Change) {
	slices.SortFunc(cs, func(a, b Change) int { return strings.Compare(a.Path, b.Path) })
}

// maxDiffCells bounds the table a line diff builds (lines changed on one
// side times the other): 4 million cells are 16 MB and a few milliseconds.
// Past it the diff says how the content changed without showing each line:
// a 20,000-line file rewritten whole took 8.9 s and 3.1 GiB unbounded.
const maxDiffCells = 4_000_000

// LineDiff is a line diff of a and b from their longest common subsequence:
// "- " a line only in a, "+ " only in b, "  " in both; where both are
// possible the removal comes first, as diff(1) prints it. The lines a and b
// share at their start and end are set aside first, so an edit to a long
// file costs what the edit costs; a changed part too long to diff line by
// line (over maxDiffCells) is said in one line beginning "~ ".
func LineDiff(a, b string) []string {
	if a == b {
		return nil
	}
	x, y := lines(a), lines(b)
	pre := 0
	for pre < len(x) && pre < len(y) && x[pre] == y[pre] {
		pre++
	}
	suf := 0
	for suf < len(x)-pre && suf < len(y)-pre && x[len(x)-1-suf] == y[len(y)-1-suf] {
		suf++
	}
	var out []string
	for _, l := range x[:pre] {
		out = append(out, "  "+l)
	}
	mx, my := x[pre:len(x)-suf], y[pre:len(y)-suf]
	if len(mx)*len(my) > maxDiffCells {
		out = append(out, fmt.Sprintf("~ lines %d to %d changed: %d line(s) became %d, too many to compare line by line (over %d comparisons)",
			pre+1, pre+len(mx), len(mx), len(my), maxDiffCells))
	} else {
		out = append(out, lcsDiff(mx, my)...)
	}
	for _, l := range x[len(x)-suf:] {
		out = append(out, "  "+l)
	}
	return out
}

// lcsDiff diffs x and y by their longest common subsequence.
func lcsDiff(x, y []string) []string {
	// lcs[i*(len(y)+1)+j] is the length of the longest common subsequence
	// of x[i:] and y[j:]; int32 halves the table.
	w := len(y) + 1
	lcs := make([]int32, (len(x)+1)*w)
	for i := len(x) - 1; i >= 0; i-- {
		for j := len(y) - 1; j >= 0; j-- {
			if x[i] == y[j] {
				lcs[i*w+j] = lcs[(i+1)*w+j+1] + 1
			} else {
				lcs[i*w+j] = max(lcs[(i+1)*w+j], lcs[i*w+j+1])
			}
		}
	}
	var out []string
	i, j := 0, 0
	for i < len(x) || j < len(y) {
		switch {
		case i < len(x) && j < len(y) && x[i] == y[j]:
			out = append(out, "  "+x[i])
			i, j = i+1, j+1
		case j < len(y) && (i == len(x) || lcs[i*w+j+1] > lcs[(i+1)*w+j]):
			out = append(out, "+ "+y[j])
			j++
		default:
			out = append(out, "- "+x[i])
			i++
		}
	}
	return out
}

func lines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}
