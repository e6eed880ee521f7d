package compose

import (
	"maps"
	"slices"
	"sort"
)

// Patch is the world of in, made from w's by indexing again only the
// nodes of touched: in must differ from w's input only in those nodes'
// entries and assignments (enrolled, retired, relabelled, their facts,
// keys or address, assigned or unassigned), and in what Compose reads
// whole from the input (mesh, secrets, rotations, network, artifacts).
// Indexing 100,000 nodes again was 0.1-0.2 CPU s of the first status after
// one label change (issue 34); what changed is a few nodes.
//
// w is not changed: a caller still composing from it composes as before.
// What did not move is shared with it (the map of names while no node
// came or went, the lists of requirements no touched node exchanges),
// the rest copied. An input whose seats being handed over differ, or that
// is not Sorted and does not list its nodes by name and its assignments
// by node (InOrder), is indexed afresh.
// TestPatchedWorldIsAFreshOne holds it to NewWorld.
func (w *World) Patch(in Input, touched map[string]bool) *World {
	if !maps.Equal(w.releasing, in.Releasing) || !in.Sorted && !in.InOrder() {
		return NewWorld(in)
	}
	n := &World{mesh: in.Mesh, nodes: in.Nodes, at: w.at, secrets: in.Secrets, gens: in.Generations, overlap: in.Overlapping,
		network: in.Network, artifacts: in.Artifacts, releasing: in.Releasing, builds: buildsOf(in.Manifests, w.builds)}
	names := slices.Sorted(maps.Keys(touched))
	same := sameNodes(w, in.Nodes, names)
	if !same {
		n.at = make(map[string]int32, len(in.Nodes))
		for i, nd := range in.Nodes {
			n.at[nd.Name] = int32(i)
		}
	}
	if same && w.placesAlike(in, names, n.builds) {
		// No placing moved (a node's labels, facts or keys, its
		// settings as they were): every list is w's. A copy of 100,000
		// placings was 30-50 ms of the status after a label change.
		n.placed, n.runs, n.providers, n.blocked, n.consumers = w.placed, w.runs, w.providers, w.blocked, w.consumers
		return n
	}
	// placed is w's with each touched node's run placed again from in.
	var fresh []placed
	n.placed = make([]placed, 0, len(w.placed)+len(names))
	from := 0
	for _, name := range names {
		lo, hi := RunOf(w.placed, name, func(p placed) string { return p.Node })
		n.placed = append(n.placed, w.placed[from:lo]...)
		from = hi
		i, ok := n.at[name]
		if !ok {
			continue // retired: it holds nothing
		}
		alo, ahi := RunOf(in.Assignments, name, AssignedNode)
		for _, a := range in.Assignments[alo:ahi] {
			p := n.place(a, in.Nodes[i])
			n.placed = append(n.placed, p)
			fresh = append(fresh, p)
		}
	}
	n.placed = append(n.placed, w.placed[from:]...)
	if !slices.IsSortedFunc(n.placed, byPlace) {
		// A node's assignments in another order than by module.
		return NewWorld(in)
	}
	n.runs = runsOf(n.nodes, n.at, n.placed)
	n.reindex(w, names, touched, fresh)
	return n
}

// sameNodes says whether nodes holds w's nodes at w's places: the touched
// ones (the others are the same by Patch's contract) each where it was,
// and no more nor fewer.
func sameNodes(w *World, nodes []Node, touched []string) bool {
	if len(nodes) != len(w.nodes) {
		return false
	}
	for _, name := range touched {
		i, ok := w.at[name]
		if !ok || nodes[i].Name != name {
			return false
		}
	}
	return true
}

// placesAlike says whether placing the touched nodes of in (at w's
// places) gives what w placed: the same capabilities (what a node lacks
// for a module), the same assignments, each build in the catalogue or
// not as it was.
func (w *World) placesAlike(in Input, touched []string, builds map[BuildRef]built) bool {
	for _, name := range touched {
		i := w.at[name]
		if !slices.Equal(w.nodes[i].Capabilities, in.Nodes[i].Capabilities) {
			return false
		}
		placed := w.assigned(name)
		lo, hi := RunOf(in.Assignments, name, AssignedNode)
		if hi-lo != len(placed) {
			return false
		}
		for j, a := range in.Assignments[lo:hi] {
			b := placed[j].Assignment
			_, had := w.builds[BuildRef{b.Module, b.Build}]
			_, has := builds[BuildRef{a.Module, a.Build}]
			if had != has || !a.Same(b) {
				return false
			}
		}
	}
	return true
}

// RunOf is the run of xs (sorted by node, as the read models list nodes
// and assignments) whose node is name: found by halving, a patch's way to
// one node among 100,000.
func RunOf[T any](xs []T, name string, node func(T) string) (lo, hi int) {
	lo = sort.Search(len(xs), func(i int) bool { return node(xs[i]) >= name })
	hi = lo
	for hi < len(xs) && node(xs[hi]) == name {
		hi++
	}
	return lo, hi
}

// reindex makes n's lists of providers and consumers w's, but for the
// requirements a touched node exchanged in w or does in n: those are w's
// without the touched nodes, with fresh (their placings in n) added.
func (n *World) reindex(w *World, names []string, touched map[string]bool, fresh []placed) {
	moved := map[string]bool{}
	exchanged := func(p placed) {
		if p.m != nil {
			for _, r := range slices.Concat(p.m.Consumes, p.m.Provides) {
				moved[r] = true
			}
		}
	}
	for _, name := range names {
		for _, p := range w.assigned(name) {
			exchanged(p)
		}
	}
	for _, p := range fresh {
		exchanged(p)
	}
	n.providers, n.blocked, n.consumers = maps.Clone(w.providers), maps.Clone(w.blocked), maps.Clone(w.consumers)
	for _, m := range []map[string][]placed{n.providers, n.blocked, n.consumers} {
		for r := range moved {
			// A new list: w's is still w's.
			kept := slices.DeleteFunc(slices.Clone(m[r]), func(p placed) bool { return touched[p.Node] })
			if len(kept) == 0 {
				delete(m, r)
			} else {
				m[r] = kept
			}
		}
	}
	for _, p := range fresh {
		n.index(p)
	}
	for _, m := range []map[string][]placed{n.providers, n.blocked, n.consumers} {
		for r := range moved {
			if _, ok := m[r]; ok {
				slices.SortFunc(m[r], byPlace)
			}
		}
	}
}
