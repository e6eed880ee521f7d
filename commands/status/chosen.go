package status

import (
	"cmp"
	"slices"

	"github.com/meshctl/mesh/commands/world"
	"github.com/meshctl/mesh/wire"
)

// chosen is which provider each consumer receives and why, for the
// requirements that more than one provider serves across the nodes shown:
// where a requirement has a single provider there was no choice to
// explain, and a fleet's status stays one line a node.
func chosen(composed *world.Composed, within map[string]bool) []wire.ConsumerChoice {
	// Two passes over the nodes that receive a provider (Choosing passes
	// over the rest before looking them up): a fleet of consumers of one
	// provider allocates nothing.
	type place struct{ node, module string }
	providers := map[string]map[place]bool{} // requirement -> the providers serving it
	for node, w := range composed.Choosing() {
		if within != nil && !within[node] {
			continue
		}
		for _, c := range w.Chosen {
			if providers[c.Requirement] == nil {
				providers[c.Requirement] = map[place]bool{}
			}
			providers[c.Requirement][place{c.Node, c.Module}] = true
		}
	}
	var out []wire.ConsumerChoice
	for node, w := range composed.Choosing() {
		if within != nil && !within[node] {
			continue
		}
		for _, c := range w.Chosen {
			if len(providers[c.Requirement]) > 1 {
				out = append(out, wire.ConsumerChoice{ConsumerNode: node, Chosen: c})
			}
		}
	}
	slices.SortFunc(out, func(a, b wire.ConsumerChoice) int {
		return cmp.Or(cmp.Compare(a.Requirement, b.Requirement), cmp.Compare(a.ConsumerNode, b.ConsumerNode),
			cmp.Compare(a.Consumer, b.Consumer), cmp.Compare(a.Node, b.Node), cmp.Compare(a.Module, b.Module))
	})
	return out
}
