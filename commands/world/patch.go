package world

import (
	"maps"
	"slices"

	"github.com/meshctl/mesh/commands/secrets"
	"github.com/meshctl/mesh/compose"
	"github.com/meshctl/mesh/projections"
)

// A composition change moves a few nodes, and the first status after one
// read composition's whole input again and indexed a new world: 0.3-0.4
// CPU s at 100,000 nodes for one label (issue 34's bound is 300 ms for the
// whole status). So the world kept at the version before is patched
// instead: the live fold says which nodes the events that moved
// composition since named (projections' MovedBetween), and when each is one node's, only those nodes' rows are read and
// put into a copy of the kept input and world; any other event (a module
// registered, the network, a seat, a rotation, an artifact, a secret
// forgotten) reads everything again, as before.
// TestPatchedInputIsAFreshRead holds it to a full read.

// patch is kept's world and input patched to version, when every event
// that moved composition since is one node's and the secrets are kept's
// (false: read and index everything).
func (h *Composer) patch(v *projections.View, kept At, version, forgets uint64, sameSecrets bool) (At, bool, error) {
	if kept.World == nil || !sameSecrets || kept.Forgets != forgets || version <= kept.Version {
		return At{}, false, nil
	}
	// At most moved.Max nodes: past that many a patch is not worth it (a
	// node is five reads of the read models, each near the cost of a
	// hundred rows of a full read), and the fold remembers no more moves.
	touched, ok := v.MovedBetween(kept.Version, version)
	if !ok {
		return At{}, false, nil
	}
	in, ok, err := h.patched(v, kept, touched)
	if err != nil || !ok {
		return At{}, false, err
	}
	at := At{World: kept.World.Patch(in, touched), Input: in, Version: version, Forgets: forgets, patchedFrom: kept.Version, touched: touched}
	return h.keep(at), true, nil
}

// patched is at's input with the nodes of touched read again from v, and
// the parts no node owns read whole; false when it cannot be made so
// (then the input is read whole). at's input is not changed: what did not
// move is shared with it, its lists copied.
func (h *Composer) patched(v *projections.View, at At, touched map[string]bool) (compose.Input, bool, error) {
	old := at.Input
	if !old.Sorted && !old.InOrder() {
		return old, false, nil // not as the read models list them
	}
	in := old
	// Each touched node's entries are spliced in where its name sorts
	// (RunOf), so the lists stay in order: the next patch need not check.
	in.Sorted = true
	in.Mesh = h.Mesh
	hasNetwork, err := h.meshWide(v, &in)
	if err != nil || in.Network != old.Network {
		return in, false, err // the network moves every node's
	}
	var cs secrets.ComposeSecrets
	if h.Keys != nil {
		var ok bool
		if cs, ok = old.Secrets.(secrets.ComposeSecrets); !ok || cs.Keys != h.Keys || cs.Secrets != h.Secrets {
			return in, false, nil
		}
	} else if old.Secrets != nil {
		return in, false, nil
	}
	// Each touched node as the read models hold it now (nil: retired or
	// never enrolled), and its assignments; the maps copied once, the
	// first time one must change.
	type now struct {
		node   *compose.Node
		lo, hi int // its assignments in fresh (an index: fresh grows)
	}
	names := slices.Sorted(maps.Keys(touched))
	nows := make([]now, len(names))
	owned, manifests := cs.Owned, old.Manifests
	ownedCopied, manifestsCopied := false, false
	var fresh []compose.Assignment
	var same shared
	for i, name := range names {
		if h.Keys != nil {
			k, found, err := v.NodeKeys(name)
			if err != nil {
				return in, false, err
			}
			if was, had := owned[name]; had != found || was != k {
				if !ownedCopied {
					owned, ownedCopied = maps.Clone(cs.Owned), true
				}
				if found {
					owned[name] = k
				} else {
					delete(owned, name)
				}
			}
		}
		row, found, err := v.Node(name)
		if err != nil {
			return in, false, err
		}
		if !found || row.Retired {
			continue
		}
		f, hasFacts, err := v.NodeFacts(name)
		if err != nil {
			return in, false, err
		}
		var address string
		if hasNetwork {
			if address, err = v.AddressOf(name); err != nil {
				return in, false, err
			}
		}
		n := h.nodeOf(row, address, owned, f, hasFacts, &same)
		rows, err := v.AssignmentsOf(name)
		if err != nil {
			return in, false, err
		}
		for _, a := range rows {
			if _, ok := manifests[compose.BuildRef{Module: a.Module, Build: a.Build}]; !ok && !manifestsCopied {
				manifests, manifestsCopied = maps.Clone(old.Manifests), true
			}
			fresh = append(fresh, h.assignmentOf(v, a, manifests))
		}
		nows[i] = now{node: &n, lo: len(fresh) - len(rows), hi: len(fresh)}
	}
	h.openAll(fresh)
	// A list whose touched entries are as they were is shared, not
	// copied: a node's labels move its entry alone, and a copy of
	// 100,000 assignments was 10-25 ms of the status after it.
	nodesAlike, assignedAlike := true, true
	for i, name := range names {
		lo, hi := compose.RunOf(old.Nodes, name, compose.NodeName)
		if nw := nows[i]; nw.node == nil {
			nodesAlike = nodesAlike && lo == hi
		} else {
			nodesAlike = nodesAlike && hi-lo == 1 && sameNode(old.Nodes[lo], *nw.node)
		}
		alo, ahi := compose.RunOf(old.Assignments, name, compose.AssignedNode)
		assignedAlike = assignedAlike && slices.EqualFunc(old.Assignments[alo:ahi], fresh[nows[i].lo:nows[i].hi], compose.Assignment.Same)
	}
	// The lists spliced: the kept input's runs up to each touched node,
	// then what the node is now.
	var gone []compose.BuildRef // builds touched nodes held before
	if !nodesAlike {
		in.Nodes = make([]compose.Node, 0, len(old.Nodes)+len(names))
	}
	if !assignedAlike {
		in.Assignments = make([]compose.Assignment, 0, len(old.Assignments)+len(fresh))
	}
	nodeFrom, assignFrom := 0, 0
	for i, name := range names {
		if !nodesAlike {
			lo, hi := compose.RunOf(old.Nodes, name, compose.NodeName)
			in.Nodes = append(in.Nodes, old.Nodes[nodeFrom:lo]...)
			nodeFrom = hi
			if nows[i].node != nil {
				in.Nodes = append(in.Nodes, *nows[i].node)
			}
		}
		if !assignedAlike {
			alo, ahi := compose.RunOf(old.Assignments, name, compose.AssignedNode)
			in.Assignments = append(in.Assignments, old.Assignments[assignFrom:alo]...)
			assignFrom = ahi
			for _, a := range old.Assignments[alo:ahi] {
				gone = append(gone, compose.BuildRef{Module: a.Module, Build: a.Build})
			}
			in.Assignments = append(in.Assignments, fresh[nows[i].lo:nows[i].hi]...)
		}
	}
	if !nodesAlike {
		in.Nodes = append(in.Nodes, old.Nodes[nodeFrom:]...)
	}
	if !assignedAlike {
		in.Assignments = append(in.Assignments, old.Assignments[assignFrom:]...)
	}
	// A build no active node runs any more is not composition's: a full
	// read would not hold its manifest.
	for _, ref := range gone {
		if _, ok := manifests[ref]; !ok || slices.ContainsFunc(in.Assignments, func(a compose.Assignment) bool { return a.Module == ref.Module && a.Build == ref.Build }) {
			continue
		}
		if !manifestsCopied {
			manifests, manifestsCopied = maps.Clone(old.Manifests), true
		}
		delete(manifests, ref)
	}
	in.Manifests = manifests
	if h.Keys != nil {
		cs.Owned = owned
		in.Secrets = cs
	}
	return in, true, nil
}
