package compose

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"text/template"

	"github.com/google/go-cmp/cmp"
)

// worldsEqual compares two worlds whole: every node, placing, run and
// list, each build's manifest and templates (a template by its name and
// parsed tree, an error by its sentence: two parses are two pointers).
var worldsEqual = []cmp.Option{
	cmp.AllowUnexported(World{}, placed{}, built{}, run{}),
	cmp.Comparer(func(a, b *template.Template) bool {
		return (a == nil) == (b == nil) && (a == nil || a.Name() == b.Name() && a.Root.String() == b.Root.String())
	}),
	cmp.Comparer(func(a, b error) bool { return (a == nil) == (b == nil) && (a == nil || a.Error() == b.Error()) }),
}

// TestPatchedWorldIsAFreshOne holds Patch to NewWorld: random changes of
// every kind Patch is given (a node's capabilities and labels, enrolling,
// retiring, assigning, unassigning, a build missing from the catalogue, a
// setting's problem), each patched into the world before it and compared
// with indexing the changed input afresh, and the world before compared
// with its own input afresh again (a patch must not change it). It fails
// if a patch leaves a placing, run or provider as it was.
func TestPatchedWorldIsAFreshOne(t *testing.T) {
	rng := rand.New(rand.NewPCG(34, 3))
	pg, app := mustParse(t, postgresDoc), mustParse(t, appDoc)
	in := input(t)
	in.Nodes = nil
	for i := range 24 {
		in.Nodes = append(in.Nodes, Node{Name: fmt.Sprintf("n-%02d", i), Capabilities: []string{"linux"}, Labels: map[string]string{}})
		if i%3 == 0 {
			in.Assignments = append(in.Assignments, pgOn(t, in.Nodes[i].Name))
		} else {
			in.Assignments = append(in.Assignments, appOn(t, in.Nodes[i].Name))
		}
	}
	w := NewWorld(in)
	enrolled := len(in.Nodes)
	for step := range 400 {
		next := in
		next.Nodes, next.Assignments = slices.Clone(in.Nodes), slices.Clone(in.Assignments)
		touched := map[string]bool{}
		for range 1 + rng.IntN(3) {
			i := rng.IntN(len(next.Nodes))
			name := next.Nodes[i].Name
			touched[name] = true
			mine := func(a Assignment) bool { return a.Node == name }
			switch rng.IntN(8) {
			case 0: // capabilities: postgres needs linux
				nd := next.Nodes[i]
				if len(nd.Capabilities) > 0 {
					nd.Capabilities = nil
				} else {
					nd.Capabilities = []string{"linux"}
				}
				next.Nodes[i] = nd
			case 1:
				next.Nodes[i].Labels = map[string]string{"zone": fmt.Sprint(rng.IntN(3))}
			case 2: // enrolled
				name = fmt.Sprintf("n-%02d", enrolled)
				enrolled++
				touched[name] = true
				next.Nodes = append(next.Nodes, Node{Name: name, Capabilities: []string{"linux"}})
				next.Assignments = append(next.Assignments, pgOn(t, name))
			case 3: // retired
				next.Nodes = slices.Delete(next.Nodes, i, i+1)
				next.Assignments = slices.DeleteFunc(next.Assignments, mine)
			case 4: // unassigned
				next.Assignments = slices.DeleteFunc(next.Assignments, mine)
			case 5: // assigned both, by module
				next.Assignments = slices.DeleteFunc(next.Assignments, mine)
				next.Assignments = append(next.Assignments, appOn(t, name), pgOn(t, name))
			case 6: // a build the catalogue lacks
				next.Assignments = slices.DeleteFunc(next.Assignments, mine)
				a := appOn(t, name)
				a.Build = strings.Repeat("0", 64)
				next.Assignments = append(next.Assignments, a)
			case 7: // a setting that no longer opens
				for j, a := range next.Assignments {
					if a.Node == name {
						a.Problem = "a secret setting does not open"
						next.Assignments[j] = a
					}
				}
			}
		}
		// Listed as the read models list them, and said so every other
		// step (Sorted): trusted or checked, the patch is the same.
		slices.SortFunc(next.Nodes, func(a, b Node) int { return strings.Compare(a.Name, b.Name) })
		slices.SortStableFunc(next.Assignments, func(a, b Assignment) int { return strings.Compare(a.Node, b.Node) })
		next.Sorted = step%2 == 0
		got := w.Patch(next, touched)
		if diff := cmp.Diff(NewWorld(next), got, worldsEqual...); diff != "" {
			t.Fatalf("step %d, touching %v: the patched world differs from a fresh one (-fresh +patched):\n%s", step, touched, diff)
		}
		if diff := cmp.Diff(NewWorld(in), w, worldsEqual...); diff != "" {
			t.Fatalf("step %d: the patch changed the world it was made from (-as it was +after):\n%s", step, diff)
		}
		in, w = next, got
	}
	if _, ok := w.builds[BuildRef{"postgres", pg.Build()}]; !ok || app.Build() == "" {
		t.Fatal("the world lost its builds")
	}

	// Lists in another order, not said Sorted: a patch would splice by an
	// order they do not have, so the world is indexed afresh.
	next := in
	next.Sorted = false
	next.Assignments = slices.Clone(in.Assignments)
	slices.Reverse(next.Assignments)
	if next.InOrder() {
		t.Fatal("the reversed assignments are in order: the case proves nothing")
	}
	name := next.Nodes[len(next.Nodes)/2].Name
	next.Assignments = slices.DeleteFunc(next.Assignments, func(a Assignment) bool { return a.Node == name })
	next.Assignments = slices.Insert(next.Assignments, 1, pgOn(t, name))
	if lo, hi := RunOf(next.Assignments, name, AssignedNode); hi > lo {
		t.Fatal("a search by name finds the node's assignment in lists out of order: the case proves nothing")
	}
	if diff := cmp.Diff(NewWorld(next), w.Patch(next, map[string]bool{name: true}), worldsEqual...); diff != "" {
		t.Fatalf("a patch of lists out of order differs from a fresh world (-fresh +patched):\n%s", diff)
	}
}
