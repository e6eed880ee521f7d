package world

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/meshctl/mesh/commands/core/coretest"
	"github.com/meshctl/mesh/commands/secrets"
	"github.com/meshctl/mesh/compose"
	"github.com/meshctl/mesh/events"

	"github.com/meshctl/mesh/manifest"
	"github.com/meshctl/mesh/projections"
	"github.com/meshctl/mesh/verdict"
)

// inputsEqual compares two inputs whole; their secrets by the keys and
// store they seal with (the same pointers) and every node's own keys.
var inputsEqual = cmp.Options{
	cmp.Comparer(func(a, b secrets.ComposeSecrets) bool {
		return a.Keys == b.Keys && a.Secrets == b.Secrets && maps.Equal(a.Owned, b.Owned)
	}),
	cmpopts.EquateEmpty(),
}

// TestPatchedInputIsAFreshRead holds a patched world to the truth: random
// sequences of the events it patches (labels and capabilities, facts a
// node reports, its own keys, assignments moved to another build or
// settings, unassignments, retirement, enrolment), real events folded
// into real read models, and after each the composer's input equal to a
// full read of the same view, and every node's would-send (its world's
// composition, and the composition cache's, which tells the changed
// nodes apart from the patch's alone) equal to composing a fresh world of
// that read; and a walk of the would-sends in their nodes' order (Walk,
// status's) saying what the map says of each, read mostly from the order
// kept since the last walk, carried over each patch by the composer or
// by a push's Keep (every third step) with the changed nodes' entries
// taken from the new map. It fails if
// a patch or an order is wrong, or if no step was patched or walked
// from an order.
func TestPatchedInputIsAFreshRead(t *testing.T) {
	t.Parallel()
	mesh := coretest.New(t, false)
	rng := rand.New(rand.NewPCG(34, 4))
	pick := func(xs []string) string { return xs[rng.IntN(len(xs))] }
	builds := map[string][]string{}
	for _, text := range changedModules {
		for _, extra := range []string{"", `,{"kind":"directory","path":"/var/x","mode":"0755"}`} {
			m, err := manifest.Parse([]byte(text[:len(text)-2] + extra + "]}"))
			if err != nil {
				t.Fatal(err)
			}
			mesh.Publish(events.ModuleAggregate(m.Module), events.ModuleRegistered{Module: m.Module, Build: m.Build(), Manifest: m.Canonical()})
			builds[m.Module] = append(builds[m.Module], m.Build())
		}
	}
	modules := slices.Sorted(maps.Keys(builds))
	overlays := curveKeys(t, 3)
	active, ownKeys := map[string]bool{}, map[string]bool{}
	enrolled := 0
	enrol := func() string {
		name := fmt.Sprintf("n-%02d", enrolled)
		enrolled++
		active[name] = true
		mesh.Publish(events.NodeAggregate(name), events.NodeEnrolled{Name: name, Capabilities: []string{"linux"}, Labels: map[string]string{"zone": "a"}})
		mesh.Report(name, events.ReportKeyRecorded{Node: name, Key: mesh.Agent.PublicKey()})
		module := pick(modules)
		mesh.Publish(events.NodeAggregate(name), events.ModuleAssigned{Node: name, Module: module, Build: builds[module][0], Settings: map[string]string{}})
		return "enrolled " + name
	}
	for range 12 {
		enrol()
	}
	c := New(mesh.Fold())
	changes := []func(node string) string{
		func(n string) string {
			mesh.Publish(events.NodeAggregate(n), events.NodeChanged{Name: n, Capabilities: []string{}, Labels: map[string]string{"zone": pick([]string{"a", "b", "c"})}})
			return "labels of " + n
		},
		func(n string) string {
			caps := []string{"linux"}
			if rng.IntN(2) == 0 {
				caps = []string{}
			}
			mesh.Publish(events.NodeAggregate(n), events.NodeChanged{Name: n, Capabilities: caps, Labels: map[string]string{"zone": "a"}})
			return "capabilities of " + n
		},
		func(n string) string {
			if ownKeys[n] {
				// Its reports are signed by the keys it made, which
				// the test does not hold.
				return "nothing of " + n
			}
			mesh.Report(n, events.NodeFactsReported{Node: n, Facts: map[string]string{"os": pick([]string{"linux", "plan9"})}, Capabilities: []string{pick([]string{"linux", "systemd"})}})
			return "facts of " + n
		},
		func(n string) string {
			ownKeys[n] = true
			mesh.Publish(events.AggregateID{Kind: events.KindKeys, ID: n}, events.NodeKeysRecorded{Node: n, Report: mesh.Agent.PublicKey(), Overlay: pick(overlays), Rekey: true})
			return "keys of " + n
		},
		func(n string) string {
			module := pick(modules)
			mesh.Publish(events.NodeAggregate(n), events.ModuleAssigned{Node: n, Module: module, Build: pick(builds[module]), Settings: map[string]string{"port": pick([]string{"1", "2"})}})
			return "assigned " + module + " to " + n
		},
		func(n string) string {
			module := pick(modules)
			mesh.Publish(events.NodeAggregate(n), events.ModuleUnassigned{Node: n, Module: module})
			return "unassigned " + module + " from " + n
		},
		func(n string) string {
			delete(active, n)
			mesh.Publish(events.NodeAggregate(n), events.NodeRetired{Name: n})
			return "retired " + n
		},
		func(string) string { return enrol() },
	}
	patched, fromOrder := 0, 0
	for step := range 60 {
		var did []string
		for range 1 + rng.IntN(3) {
			did = append(did, changes[rng.IntN(len(changes))](pick(slices.Sorted(maps.Keys(active)))))
		}
		mesh.CaughtUp()
		if step%3 == 2 {
			// As a push keeps what it composed (Keep), and the order
			// with it.
			keep(t, c, mesh.Proj)
		}
		composed, err := c.ComposeAll()
		if err != nil {
			t.Fatal(err)
		}
		err = mesh.Proj.Read(func(v *projections.View) error {
			at, err := c.At(v)
			if err != nil {
				return err
			}
			if at.patchedFrom != 0 {
				patched++
			}
			fresh, err := c.Input(v)
			if err != nil {
				return err
			}
			if diff := cmp.Diff(fresh, at.Input, inputsEqual); diff != "" {
				t.Fatalf("step %d (%v): the patched input differs from a full read (-read +patched):\n%s", step, did, diff)
			}
			world := compose.NewWorld(fresh)
			for _, n := range world.Nodes() {
				want := Of(world.Compose(n))
				if diff := cmp.Diff(want, Of(at.World.Compose(n)), cmpopts.EquateEmpty()); diff != "" {
					t.Fatalf("step %d (%v): %s composes otherwise in the patched world (-fresh +patched):\n%s", step, did, n, diff)
				}
				if diff := cmp.Diff(want, composed.Of(n), cmpopts.EquateEmpty(), cmpopts.IgnoreFields(verdict.Would{}, "Since")); diff != "" {
					t.Fatalf("step %d (%v): %s's cached would-send is not a fresh composition's (-fresh +cached):\n%s", step, did, n, diff)
				}
			}
			if composed.Len() != len(world.Nodes()) {
				t.Fatalf("step %d (%v): %d would-sends cached for %d nodes", step, did, composed.Len(), len(world.Nodes()))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		fromOrder += walkAgrees(t, c, composed, enrolled, fmt.Sprintf("step %d (%v)", step, did))
	}
	if patched < 50 {
		t.Fatalf("%d steps of 60 were patched; the rest read everything again", patched)
	}
	if fromOrder < 200 {
		t.Fatalf("%d would-sends of the walks were read from an order kept: the rest from the map", fromOrder)
	}
}

// keep composes the nodes of the world at the view's version, as a push
// does, and hands them to the cache: all but every fourth, as a push
// leaves out the nodes a hand holds, which Keep composes itself.
func keep(t *testing.T, c *Composer, proj *projections.Engine) {
	t.Helper()
	err := proj.Read(func(v *projections.View) error {
		at, err := c.At(v)
		if err != nil {
			return err
		}
		composed := map[string]Would{}
		for i, n := range at.World.Nodes() {
			if i%4 != 3 {
				composed[n] = Of(at.World.Compose(n))
			}
		}
		c.Keep(at, composed)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// walkAgrees walks composed as status does (every node ever enrolled, the
// retired among them, in their names' order) and fails unless each
// would-send read says what the map says of it, as the verdict reads
// it. It answers how many were read from an order kept.
func walkAgrees(t *testing.T, c *Composer, composed *Composed, enrolled int, when string) int {
	t.Helper()
	walk := c.Walk(composed)
	for i := range enrolled {
		n := fmt.Sprintf("n-%02d", i)
		want, got := composed.Of(n), walk.Of(n)
		if diff := cmp.Diff(want.Would, got.Would); diff != "" {
			t.Fatalf("%s: the walk's would-send of %s is not the map's (-map +walk):\n%s", when, n, diff)
		}
		if !slices.Equal(want.LeftOut(), got.LeftOut()) {
			t.Fatalf("%s: the walk leaves out %v of %s, the map %v", when, got.LeftOut(), n, want.LeftOut())
		}
	}
	return walk.fromOrder
}
