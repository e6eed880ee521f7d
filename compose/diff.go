package compose

import (
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
				changes = append(changes, Change{Path: r.Path, Change: "added", Module: r.Module, Lines: LineDiff("", text(r.Content))})
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
	sortChanges(changes)
	return changes
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
	if text(o.Content) != text(n.Content) {
		c.What = append(c.What, "content")
		c.Lines = LineDiff(text(o.Content), text(n.Content))
	}
	return c, len(c.What) > 0
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

// LineDiff is a line diff of a and b from their longest common subsequence:
// "- " a line only in a, "+ " only in b, "  " in both; where both are
// possible the removal comes first, as diff(1) prints it. Config files are
// small; the quadratic table is never the cost of a plan.
func LineDiff(a, b string) []string {
	if a == b {
		return nil
	}
	x, y := lines(a), lines(b)
	// lcs[i][j] is the length of the longest common subsequence of x[i:] and y[j:].
	lcs := make([][]int, len(x)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(y)+1)
	}
	for i := len(x) - 1; i >= 0; i-- {
		for j := len(y) - 1; j >= 0; j-- {
			if x[i] == y[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
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
		case j < len(y) && (i == len(x) || lcs[i][j+1] > lcs[i+1][j]):
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
