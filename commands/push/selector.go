package push

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/meshctl/mesh/aggregates"
	"github.com/meshctl/mesh/projections"
	"github.com/meshctl/mesh/wire"
)

// Selector chooses nodes by what the mesh knows of them. Its text is `*`
// (every active node), `name=NODE` (that one node), or comma-separated
// terms that must all hold: `KEY=VALUE` for a label, or, on a node with no
// label KEY, for a fact its agent detected (os=linux, arch=arm64: the
// operator's label wins over detection); `capability=NAME` for a
// capability the node was declared or detected to have. Retired nodes are
// never chosen: nothing may be assigned or sent to them.
type Selector struct {
	text  string
	all   bool
	name  string
	caps  []string
	label map[string]string
}

// ParseSelector reads a selector, or says what is wrong with it.
func ParseSelector(s string) (Selector, error) {
	sel := Selector{text: s, label: map[string]string{}}
	s = strings.TrimSpace(s)
	if s == "*" {
		sel.all = true
		return sel, nil
	}
	if s == "" {
		return sel, selectorError(s, "it is empty")
	}
	for term := range strings.SplitSeq(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(term), "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		switch {
		case !ok || k == "" || v == "":
			return sel, selectorError(s, fmt.Sprintf("the term %q is not KEY=VALUE", term))
		case k == "name":
			if sel.name != "" && sel.name != v {
				return sel, selectorError(s, "it names two nodes; a node has one name")
			}
			sel.name = v
		case k == "capability":
			sel.caps = append(sel.caps, v)
		default:
			if have, dup := sel.label[k]; dup && have != v {
				return sel, selectorError(s, fmt.Sprintf("it asks label %s to be both %q and %q", k, have, v))
			}
			sel.label[k] = v
		}
	}
	return sel, nil
}

func selectorError(s, why string) error {
	return aggregates.Refuse("select nodes by", fmt.Sprintf("%q", s), aggregates.ErrInvalid, why+`; a selector is *, name=NODE, or comma-separated KEY=VALUE label (or fact) terms and capability=NAME terms, all of which must hold`)
}

// String is the selector as it was given.
func (s Selector) String() string { return s.text }

// Matches reports whether the node, with the facts its agent last
// reported, is chosen.
func (s Selector) Matches(n projections.Node, f projections.Facts) bool {
	if n.Retired {
		return false
	}
	if s.all {
		return true
	}
	if s.name != "" && n.Name != s.name {
		return false
	}
	for k, v := range s.label {
		have, ok := n.Labels[k]
		if !ok {
			have, ok = f.Facts[k]
		}
		if !ok || have != v {
			return false
		}
	}
	for _, c := range s.caps {
		if !slices.Contains(n.Capabilities, c) && !slices.Contains(f.Capabilities, c) {
			return false
		}
	}
	return true
}

// SelectNodes answers the names of the active nodes a selector chooses, in
// name order.
func (h *Service) SelectNodes(ctx context.Context, r wire.SelectRequest) (wire.Selected, error) {
	sel, err := ParseSelector(r.Selector)
	if err != nil {
		return wire.Selected{}, err
	}
	// A selector read just after a bulk enrol must see it.
	if err := h.CatchUp(ctx); err != nil {
		return wire.Selected{}, err
	}
	out := wire.Selected{Nodes: []string{}}
	err = h.Proj.Read(func(v *projections.View) error {
		nodes, err := v.Nodes()
		if err != nil {
			return err
		}
		facts, err := v.AllFacts()
		for _, n := range nodes {
			if sel.Matches(n, facts[n.Name]) {
				out.Nodes = append(out.Nodes, n.Name)
			}
		}
		return err
	})
	return out, err
}
