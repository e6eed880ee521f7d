package world

import (
	"maps"
	"slices"
	"strings"

	"github.com/meshctl/mesh/commands/secrets"
	"github.com/meshctl/mesh/compose"
)

// Changed names the nodes whose composition may differ between two inputs,
// or answers false when the change is the whole mesh's (its mesh, network
// range, rotations, artifacts, or the keys and secrets every seal reads),
// and every node must be composed again.
//
// A node's composition reads its own node (capabilities, labels, facts,
// address, keys), its own assignments with their manifests and settings,
// and, through what its modules consume and provide, the providers and
// consumers of those requirements: whom it chooses and on which node
// (labels, address), what they are set to, whom a provider mints a
// credential for, its overlay peers. So a node whose own part changed
// moves itself and every provider and consumer of each requirement its
// modules provide or consume, before the change or after it; nothing else
// (a consumer's choice reads only the providers and the two nodes, never
// the other consumers). TestChangedNamesEveryNodeWhoseCompositionMoved
// holds it to composing everything again.
func Changed(old, new compose.Input) (map[string]bool, bool) { return changed(old, new, nil) }

// changedAmong is Changed of two inputs that differ only in the entries
// and assignments of the nodes of touched, as a patched input differs
// from the one it was patched from (patch.go): only those are compared,
// not every node. Walking 100,000 nodes and assignments of both was 0.05
// CPU s of the first status after one label change (issue 34).
func changedAmong(old, new compose.Input, touched map[string]bool) (map[string]bool, bool) {
	return changed(old, new, slices.Sorted(maps.Keys(touched)))
}

// changed is Changed, comparing only the nodes of only (sorted) when it is
// not nil.
func changed(old, new compose.Input, only []string) (map[string]bool, bool) {
	if old.Mesh != new.Mesh || old.Network != new.Network || !maps.Equal(old.Generations, new.Generations) ||
		!maps.Equal(old.Overlapping, new.Overlapping) || !maps.Equal(old.Artifacts, new.Artifacts) {
		return nil, false
	}
	oldSealer, newSealer, ok := sameSealers(old.Secrets, new.Secrets)
	if !ok {
		return nil, false
	}
	changed := map[string]bool{}
	// A seat handed over moves its holder's module instance.
	for key, why := range new.Releasing {
		if old.Releasing[key] != why {
			changed[nodeOf(key)] = true
		}
	}
	for key := range old.Releasing {
		if _, ok := new.Releasing[key]; !ok {
			changed[nodeOf(key)] = true
		}
	}
	// Walked side by side, by node name: maps of 100,000 nodes and
	// assignments were most of what this cost.
	walkAmong(only, old.Nodes, new.Nodes, compose.NodeName, func(name string, o, n []compose.Node) {
		if len(o) != 1 || len(n) != 1 || !sameNode(o[0], n[0]) || keysOf(oldSealer, name) != keysOf(newSealer, name) {
			changed[name] = true
		}
	})
	// Every requirement a changed node's modules exchange, before or
	// after, moves every node on either end of it.
	reqs := map[string]bool{}
	exchanges := func(in compose.Input, as []compose.Assignment) {
		for _, a := range as {
			if m, ok := in.Manifests[compose.BuildRef{Module: a.Module, Build: a.Build}]; ok {
				for _, r := range slices.Concat(m.Consumes, m.Provides) {
					reqs[r] = true
				}
			}
		}
	}
	walkAmong(only, old.Assignments, new.Assignments, compose.AssignedNode, func(node string, o, n []compose.Assignment) {
		if changed[node] || !sameAssignments(old, new, o, n) {
			changed[node] = true
			exchanges(old, o)
			exchanges(new, n)
		}
	})
	if len(reqs) == 0 {
		return changed, true
	}
	for _, a := range new.Assignments {
		m, ok := new.Manifests[compose.BuildRef{Module: a.Module, Build: a.Build}]
		if ok && (slices.ContainsFunc(m.Consumes, func(r string) bool { return reqs[r] }) || slices.ContainsFunc(m.Provides, func(r string) bool { return reqs[r] })) {
			changed[a.Node] = true
		}
	}
	return changed, true
}

// walk pairs two lists by node name, each node's run in one with its run in
// the other (empty where it has none). An input lists its nodes and
// assignments by node name already (the read models' key order); a list
// that is not is sorted first.
func walk[T any](old, new []T, node func(T) string, fn func(name string, o, n []T)) {
	byName := func(a, b T) int { return strings.Compare(node(a), node(b)) }
	if !slices.IsSortedFunc(old, byName) {
		old = slices.Clone(old)
		slices.SortStableFunc(old, byName)
	}
	if !slices.IsSortedFunc(new, byName) {
		new = slices.Clone(new)
		slices.SortStableFunc(new, byName)
	}
	run := func(xs []T, i int) int {
		j := i + 1
		for j < len(xs) && node(xs[j]) == node(xs[i]) {
			j++
		}
		return j
	}
	i, j := 0, 0
	for i < len(old) || j < len(new) {
		switch {
		case j == len(new) || i < len(old) && node(old[i]) < node(new[j]):
			e := run(old, i)
			fn(node(old[i]), old[i:e], nil)
			i = e
		case i == len(old) || node(new[j]) < node(old[i]):
			e := run(new, j)
			fn(node(new[j]), nil, new[j:e])
			j = e
		default:
			ei, ej := run(old, i), run(new, j)
			fn(node(old[i]), old[i:ei], new[j:ej])
			i, j = ei, ej
		}
	}
}

// walkAmong is walk, but only of the nodes of only (sorted) when it is not
// nil, each found by halving (both lists by node name, as a patch keeps
// them): a node in neither list is not walked.
func walkAmong[T any](only []string, old, new []T, node func(T) string, fn func(name string, o, n []T)) {
	if only == nil {
		walk(old, new, node, fn)
		return
	}
	for _, name := range only {
		olo, ohi := compose.RunOf(old, name, node)
		nlo, nhi := compose.RunOf(new, name, node)
		if olo < ohi || nlo < nhi {
			fn(name, old[olo:ohi], new[nlo:nhi])
		}
	}
}

// ownedKeys are the keys a node made itself, as sealing reads them.
type ownedKeys struct{ seal, overlay string }

func keysOf(s secrets.ComposeSecrets, node string) ownedKeys {
	k := s.Owned[node]
	return ownedKeys{seal: k.Seal, overlay: k.Overlay}
}

// sameSealers reports whether two inputs seal with the same controller
// keys and secrets; the keys made on nodes are each node's own part.
func sameSealers(old, new compose.Secrets) (o, n secrets.ComposeSecrets, same bool) {
	if old == nil || new == nil {
		return o, n, old == nil && new == nil
	}
	o, ok1 := old.(secrets.ComposeSecrets)
	n, ok2 := new.(secrets.ComposeSecrets)
	return o, n, ok1 && ok2 && o.Keys == n.Keys && o.Secrets == n.Secrets
}

func sameNode(a, b compose.Node) bool {
	return a.Name == b.Name && a.Address == b.Address && a.Key == b.Key && slices.Equal(a.Capabilities, b.Capabilities) &&
		maps.Equal(a.Labels, b.Labels) && maps.Equal(a.Facts, b.Facts)
}

// sameAssignments compares one node's assignments in two inputs, with
// whether each build's manifest is in the catalogue (a build is its
// content, so the manifest itself cannot differ). Both list them by
// module (the read models' key order); listed otherwise, they differ.
func sameAssignments(oldIn, newIn compose.Input, old, new []compose.Assignment) bool {
	if len(old) != len(new) {
		return false
	}
	for i := range old {
		a, b := old[i], new[i]
		_, hadManifest := oldIn.Manifests[compose.BuildRef{Module: a.Module, Build: a.Build}]
		_, hasManifest := newIn.Manifests[compose.BuildRef{Module: b.Module, Build: b.Build}]
		if hadManifest != hasManifest || !a.Same(b) {
			return false
		}
	}
	return true
}

// nodeOf is the node of a "node/module" key.
func nodeOf(key string) string {
	node, _, _ := strings.Cut(key, "/")
	return node
}
