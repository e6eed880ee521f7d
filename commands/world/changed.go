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
func Changed(old, new compose.Input) (map[string]bool, bool) {
	if old.Mesh != new.Mesh || old.Network != new.Network || !maps.Equal(old.Generations, new.Generations) ||
		!maps.Equal(old.Overlapping, new.Overlapping) || !maps.Equal(old.Artifacts, new.Artifacts) {
		return nil, false
	}
	oldSealer, newSealer, ok := sameSealers(old.Secrets, new.Secrets)
	if !ok {
		return nil, false
	}
	changed := map[string]bool{}
	oldNodes := make(map[string]compose.Node, len(old.Nodes))
	for _, n := range old.Nodes {
		oldNodes[n.Name] = n
	}
	for _, n := range new.Nodes {
		if o, ok := oldNodes[n.Name]; !ok || !sameNode(o, n) || keysOf(oldSealer, n.Name) != keysOf(newSealer, n.Name) {
			changed[n.Name] = true
		}
		delete(oldNodes, n.Name)
	}
	for name := range oldNodes {
		changed[name] = true // retired
	}
	oldAs, newAs := byNode(old.Assignments), byNode(new.Assignments)
	for node, as := range newAs {
		if !sameAssignments(old, new, oldAs[node], as) {
			changed[node] = true
		}
	}
	for node := range oldAs {
		if _, ok := newAs[node]; !ok {
			changed[node] = true
		}
	}
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
	// Every requirement a changed node's modules exchange, before or
	// after, moves every node on either end of it.
	reqs := map[string]bool{}
	for node := range changed {
		for _, in := range []struct {
			in compose.Input
			as []compose.Assignment
		}{{old, oldAs[node]}, {new, newAs[node]}} {
			for _, a := range in.as {
				if m, ok := in.in.Manifests[compose.BuildRef{Module: a.Module, Build: a.Build}]; ok {
					for _, r := range slices.Concat(m.Consumes, m.Provides) {
						reqs[r] = true
					}
				}
			}
		}
	}
	if len(reqs) == 0 {
		return changed, true
	}
	for node, as := range newAs {
		for _, a := range as {
			m, ok := new.Manifests[compose.BuildRef{Module: a.Module, Build: a.Build}]
			if ok && (slices.ContainsFunc(m.Consumes, func(r string) bool { return reqs[r] }) || slices.ContainsFunc(m.Provides, func(r string) bool { return reqs[r] })) {
				changed[node] = true
			}
		}
	}
	return changed, true
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

// byNode groups assignments by node. An input lists them by node already
// (the read models' key order), so each node's are a slice of it.
func byNode(as []compose.Assignment) map[string][]compose.Assignment {
	out := map[string][]compose.Assignment{}
	for i := 0; i < len(as); {
		j := i + 1
		for j < len(as) && as[j].Node == as[i].Node {
			j++
		}
		if have, ok := out[as[i].Node]; ok {
			out[as[i].Node] = slices.Concat(have, as[i:j])
		} else {
			out[as[i].Node] = as[i:j:j]
		}
		i = j
	}
	return out
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
		if a.Module != b.Module || a.Build != b.Build || a.Problem != b.Problem || hadManifest != hasManifest ||
			!maps.Equal(a.Settings, b.Settings) || !maps.Equal(a.Salts, b.Salts) {
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
