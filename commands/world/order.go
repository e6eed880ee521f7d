package world

import (
	"maps"
	"slices"
	"strings"

	"github.com/meshctl/mesh/verdict"
)

// order is one composition version's would-sends in their nodes' name
// order, the order status reads node rows in: at 100,000 nodes looking
// each row's would-send up by its name in the map was a third of a
// status's CPU (a hash and three or four cache misses a node; issue 34),
// where walking two lists in one order reads each once, in a row. An
// entry holds only what the verdict reads of a plain would-send
// (composable, nothing left out, unresolved or said; entry): any other, and
// any node the order lacks, is read from the Composed. So an order may
// lack any node, but an entry it holds never says other than the Composed
// (TestPatchedInputIsAFreshRead holds it to that). About 40 bytes a
// node, and no copy of a Would: the Composed stays the one copy of them.
type order []ordered

type ordered struct {
	name, digest string
	plain        bool
}

// Walk reads the would-sends of nodes (what ComposeAll answered) for
// names asked in rising order: from the order the cache keeps for nodes
// when it still holds them (every composition cached makes one, in Keep
// or composedAt), else from nodes. Names asked out of order are read
// right, from nodes.
type Walk struct {
	nodes     *Composed
	have      order // the cache's order of nodes; nil when it keeps none
	i         int
	fromOrder int // how many were read from have: what the order saved
}

// Walk starts a walk over nodes.
func (h *Composer) Walk(nodes *Composed) *Walk {
	return &Walk{nodes: nodes, have: h.composed.orderOf(nodes)}
}

// Of is name's would-send.
func (w *Walk) Of(name string) Would {
	for w.i < len(w.have) && w.have[w.i].name < name {
		w.i++
	}
	if e := w.i; e < len(w.have) && w.have[e].plain && w.have[e].name == name {
		w.fromOrder++
		return Would{Would: verdict.Would{Composable: true, ContentDigest: w.have[e].digest}}
	}
	return w.nodes.Of(name)
}

// after is prev's order for a version whose would-sends are prev's but
// those of changed: theirs are read from fresh (the changed nodes composed
// again), a node not there is dropped, and a new one joins in its place. A copy of
// about 40 bytes a node, in runs between the changed, not of the
// would-sends.
func (prev order) after(changed map[string]bool, fresh map[string]Would) order {
	if prev == nil {
		return nil
	}
	next := make(order, 0, len(prev)+len(changed))
	i := 0
	for _, n := range slices.Sorted(maps.Keys(changed)) {
		j, found := slices.BinarySearchFunc(prev[i:], n, func(e ordered, n string) int { return strings.Compare(e.name, n) })
		next = append(next, prev[i:i+j]...)
		if i += j; found {
			i++
		}
		if w, ok := fresh[n]; ok {
			next = append(next, entry(n, w))
		}
	}
	return append(next, prev[i:]...)
}

// entry is name's place in an order. The name is kept as given: the
// world's own, or the read models' (projections' EachNode hands each node
// the memory's name, never a row's in an arena that is written again).
func entry(name string, w Would) ordered {
	return ordered{name: name, digest: w.ContentDigest, plain: w.Composable && w.Reason == "" && w.Since.IsZero() && w.Short == nil}
}
