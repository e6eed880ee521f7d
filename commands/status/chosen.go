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
func chosen(composed map[string]world.Would, within map[string]bool) []wire.ConsumerChoice {
	providers := map[string]map[string]bool{} // requirement -> "node/module" serving it
	var out []wire.ConsumerChoice
	for node, w := range composed {
		if within != nil && !within[node] {
			continue
		}
		for _, c := range w.Chosen {
			if providers[c.Requirement] == nil {
				providers[c.Requirement] = map[string]bool{}
			}
			providers[c.Requirement][c.Node+"/"+c.Module] = true
			out = append(out, wire.ConsumerChoice{ConsumerNode: node, Chosen: c})
		}
	}
	out = slices.DeleteFunc(out, func(c wire.ConsumerChoice) bool { return len(providers[c.Requirement]) < 2 })
	slices.SortFunc(out, func(a, b wire.ConsumerChoice) int {
		return cmp.Or(cmp.Compare(a.Requirement, b.Requirement), cmp.Compare(a.ConsumerNode, b.ConsumerNode),
			cmp.Compare(a.Consumer, b.Consumer), cmp.Compare(a.Node, b.Node), cmp.Compare(a.Module, b.Module))
	})
	return out
}
