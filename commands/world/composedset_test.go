package world

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/meshctl/mesh/compose"
	"github.com/meshctl/mesh/verdict"
)

// A chain of patches says of every node what one map patched the same way
// says: each node held, with its would-send, none taken out, and the count.
// Patches that add, replace and take out nodes run long enough for the
// moved nodes to be carried over many versions and folded into a map of
// their own more than once; every version of the chain is checked again at
// its end, since a version is read on while newer ones are made from it.
func TestAPatchedCompositionSaysWhatItsMapWould(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(2026, 12))
	name := func() string { return fmt.Sprintf("n-%03d", rng.IntN(400)) }
	would := func(step int) Would {
		w := Would{Would: verdict.Would{Composable: rng.IntN(2) == 0, ContentDigest: fmt.Sprint(step)}}
		if rng.IntN(3) == 0 { // one in three receives a provider
			w.Chosen = []compose.Chosen{{Receipt: compose.Receipt{Requirement: "db", Node: fmt.Sprint(step)}}}
		}
		return w
	}
	model := map[string]Would{}
	for range 300 {
		model[name()] = would(0)
	}
	c := composedOf(maps.Clone(model))
	type version struct {
		c     *Composed
		model map[string]Would
	}
	var chain []version
	flattened := 0
	for step := 1; step <= 400; step++ {
		changed := map[string]bool{}
		over := map[string]Would{}
		for range 1 + rng.IntN(12) {
			n := name()
			changed[n] = true
			if rng.IntN(4) == 0 {
				delete(model, n) // retired, or never there
				delete(over, n)
				continue
			}
			w := would(step)
			model[n], over[n] = w, w
		}
		before := c
		c = c.patched(changed, over)
		if reflect.ValueOf(c.base).UnsafePointer() != reflect.ValueOf(before.base).UnsafePointer() {
			flattened++
		}
		chain = append(chain, version{c, maps.Clone(model)})
		agrees(t, c, model, fmt.Sprintf("step %d", step))
	}
	for i, v := range chain {
		agrees(t, v.c, v.model, fmt.Sprintf("version %d, read again at the end", i+1))
	}
	if flattened < 2 {
		t.Fatalf("the moved nodes were folded into a map of their own %d times in 400 patches; the test never reaches it", flattened)
	}
}

// agrees fails unless c holds exactly model's nodes and would-sends.
func agrees(t *testing.T, c *Composed, model map[string]Would, when string) {
	t.Helper()
	if c.Len() != len(model) {
		t.Fatalf("%s: %d would-sends counted, the map holds %d", when, c.Len(), len(model))
	}
	for i := range 400 {
		n := fmt.Sprintf("n-%03d", i)
		got, ok := c.Lookup(n)
		want, held := model[n]
		if ok != held || got.Would != want.Would {
			t.Fatalf("%s: %s is %+v (held %v), the map's %+v (held %v)", when, n, got, ok, want, held)
		}
	}
	seen := map[string]bool{}
	for n, w := range c.All() {
		if seen[n] {
			t.Fatalf("%s: All yields %s twice", when, n)
		}
		seen[n] = true
		if want, held := model[n]; !held || w.Would != want.Would {
			t.Fatalf("%s: All yields %s as %+v, the map holds %+v (held %v)", when, n, w, want, held)
		}
	}
	if len(seen) != len(model) {
		t.Fatalf("%s: All yields %d nodes, the map holds %d", when, len(seen), len(model))
	}
	// Choosing is All's nodes that receive a provider, and only those.
	choosing := map[string]bool{}
	for n, w := range c.Choosing() {
		if choosing[n] {
			t.Fatalf("%s: Choosing yields %s twice", when, n)
		}
		choosing[n] = true
		if want := model[n]; len(want.Chosen) == 0 || !reflect.DeepEqual(w.Chosen, want.Chosen) {
			t.Fatalf("%s: Choosing yields %s choosing %+v, the map holds %+v", when, n, w.Chosen, want.Chosen)
		}
	}
	for n, w := range model {
		if len(w.Chosen) > 0 && !choosing[n] {
			t.Fatalf("%s: Choosing leaves out %s, which chooses %+v", when, n, w.Chosen)
		}
	}
}
