package world

import (
	"testing"

	"github.com/meshctl/mesh/commands/core/coretest"
	"github.com/meshctl/mesh/events"
)

// Memo makes its value once for the would-sends the cache holds, and
// again once composition moved: status's choices among providers kept
// past a change would name the providers of before it.
func TestMemoIsMadeOnceAVersion(t *testing.T) {
	t.Parallel()
	mesh := coretest.New(t, false)
	mesh.Publish(events.NodeAggregate("web-1"), events.NodeEnrolled{Name: "web-1", Capabilities: []string{}, Labels: map[string]string{}})
	c := New(mesh.Fold())
	made := 0
	memo := func(nodes *Composed) any {
		return c.Memo(nodes, func() any { made++; return nodes.Len() })
	}
	first, err := c.ComposeAll()
	if err != nil {
		t.Fatal(err)
	}
	if memo(first) != 1 || memo(first) != 1 || made != 1 {
		t.Fatalf("made %d times for one version's would-sends, want once", made)
	}
	mesh.Publish(events.NodeAggregate("web-2"), events.NodeEnrolled{Name: "web-2", Capabilities: []string{}, Labels: map[string]string{}})
	mesh.CaughtUp()
	moved, err := c.ComposeAll()
	if err != nil {
		t.Fatal(err)
	}
	if got := memo(moved); got != 2 || made != 2 {
		t.Fatalf("after an enrolment the memo is %v (made %d times), want 2 made twice", got, made)
	}
	// The older would-sends are no longer the cache's: made each time,
	// and never kept for the newer.
	if memo(first) != 1 || made != 3 || memo(moved) != 2 || made != 3 {
		t.Fatalf("made %d times, want 3", made)
	}
}
