package world

import (
	"testing"
	"time"

	"github.com/meshctl/mesh/embedded/embeddedtest"
	"github.com/meshctl/mesh/events"
)

// Composition is kept ahead of the first status after a change, and only
// while it is asked for: a change after a caller asked is composed with
// nobody asking again, once; a change nobody asked after is left to whoever
// asks. Fails when ahead composes unasked (a bulk enrolment would compose
// the mesh at every settle), when it never composes, or when it keeps
// composing after composing once unused.
func TestCompositionIsKeptAheadOnlyWhileAskedFor(t *testing.T) {
	t.Parallel()
	mesh, _ := motdMesh(t, "web-1", "web-2")
	c := New(mesh.Fold())
	label := func(zone string) {
		t.Helper()
		mesh.Publish(events.NodeAggregate("web-1"), events.NodeChanged{Name: "web-1", Capabilities: []string{}, Labels: map[string]string{"zone": zone}})
		mesh.CaughtUp()
	}
	cached := func() bool {
		t.Helper()
		_, ok, err := c.cachedNow()
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}

	label("a")
	if c.ahead(); cached() {
		t.Fatal("composed ahead with nobody having asked for composition")
	}
	if _, err := c.ComposeAll(); err != nil {
		t.Fatal(err)
	}
	label("b")
	if c.ahead(); !cached() {
		t.Fatal("a change after a caller asked was not composed ahead")
	}
	label("c")
	if c.ahead(); cached() {
		t.Fatal("composed ahead again though nobody asked since the last composition ahead")
	}

	// The loop the controller runs does the same on its own.
	stop := c.KeepAhead(time.Millisecond)
	defer stop()
	if _, err := c.ComposeAll(); err != nil {
		t.Fatal(err)
	}
	label("d")
	embeddedtest.Eventually(t, "the change after a status composed ahead", cached)
}
