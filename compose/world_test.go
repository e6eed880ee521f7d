package compose

import (
	"slices"
	"testing"
)

// TestWorldSharesItsInputsNodes holds the world to keeping each node once:
// the input's list of nodes is the world's, not a copy, and every node's
// assignments are one run of one list. A world that copied them held the
// 100,000 nodes of issue 34's fleet twice (54-65 MB beside its 24 MB
// input), and the controller past its 700 MiB bound; so did a manifest
// copied for each of a build's assignments.
func TestWorldSharesItsInputsNodes(t *testing.T) {
	// Listed out of node order, as no read model lists them: the world
	// must find each node's run all the same.
	in := input(t, appOn(t, "web-1"), pgOn(t, "db-1"), pgOn(t, "web-1"), pgOn(t, "db-2"))
	w := NewWorld(in)
	if &w.nodes[0] != &in.Nodes[0] || len(w.nodes) != len(in.Nodes) {
		t.Fatal("the world copied its input's nodes rather than sharing them")
	}
	if len(w.placed) != len(in.Assignments) || cap(w.placed) != len(in.Assignments) {
		t.Fatalf("the world holds %d placed assignments (room for %d), want %d: one list, each once", len(w.placed), cap(w.placed), len(in.Assignments))
	}
	for node, want := range map[string][]string{"db-1": {"postgres"}, "db-2": {"postgres"}, "web-1": {"app", "postgres"}} {
		var got []string
		for _, p := range w.assigned(node) {
			got = append(got, p.Module)
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s's assignments are %v, want %v", node, got, want)
		}
	}
	if a, b := w.assigned("db-1"), w.assigned("db-2"); a[0].m == nil || a[0].m != b[0].m {
		t.Error("two assignments of one build hold two copies of its manifest, not one")
	}
	if w.assigned("nobody") != nil || w.Has("nobody") || w.node("nobody").Name != "" {
		t.Error("the world answers for a node it does not hold")
	}
	// And a world of the same input in node order composes the same.
	sorted := input(t, pgOn(t, "db-1"), pgOn(t, "db-2"), appOn(t, "web-1"), pgOn(t, "web-1"))
	for _, n := range []string{"db-1", "db-2", "web-1"} {
		if a, b := w.Compose(n), NewWorld(sorted).Compose(n); a.Digest != b.Digest || a.Reason() != b.Reason() {
			t.Errorf("%s composes to %q (%s) from an unsorted input, %q (%s) from a sorted one", n, a.Digest, a.Reason(), b.Digest, b.Reason())
		}
	}
}
