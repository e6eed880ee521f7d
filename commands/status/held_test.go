package status

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/meshctl/mesh/commands/core/coretest"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/manifest"
	"github.com/meshctl/mesh/projections"
	"github.com/meshctl/mesh/wire"
)

// After a composition change status's held reads the assignments
// composition has just read (EachAssignedAt), not every row again; what it
// says of each active node must be what reading every row (holdsOf)
// says. It fails if the fast path is not taken, or if it names a node,
// a module or a policy otherwise than the full reading.
func TestHeldFromComposedAssignmentsAgreesWithReadingEveryRow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	mesh := coretest.New(t, false)
	var builds []string
	for _, text := range []string{`{"module":"motd","resources":[{"kind":"file","path":"/etc/motd","mode":"0644","template":"a {{.Node.Name}}"}]}`,
		`{"module":"motd","resources":[{"kind":"file","path":"/etc/motd","mode":"0644","template":"b {{.Node.Name}}"}]}`,
		`{"module":"tmp","resources":[{"kind":"file","path":"/etc/tmp","mode":"0644","template":"t"}]}`,
		`{"module":"tmp","resources":[{"kind":"file","path":"/etc/tmp","mode":"0644","template":"u"}]}`} {
		m, err := manifest.Parse([]byte(text))
		must(t, err)
		builds = append(builds, m.Build()) // each module's second is its newest
		mesh.Publish(events.ModuleAggregate(m.Module), events.ModuleRegistered{Module: m.Module, Build: m.Build(), Manifest: m.Canonical()})
	}
	policies := []events.Policy{"", events.PolicyManual, events.PolicyPinned, events.PolicyAuto}
	for i := range 12 {
		name := fmt.Sprintf("n-%02d", i)
		mesh.Publish(events.NodeAggregate(name), events.NodeEnrolled{Name: name, Capabilities: []string{}, Labels: map[string]string{}})
		mesh.Publish(events.NodeAggregate(name), events.ModuleAssigned{Node: name, Module: "motd", Build: builds[i%2], Settings: map[string]string{}, Policy: policies[i%4]})
		if i%3 == 0 {
			mesh.Publish(events.NodeAggregate(name), events.ModuleAssigned{Node: name, Module: "tmp", Build: builds[2], Settings: map[string]string{}, Policy: policies[(i+1)%4]})
		}
	}
	mesh.Publish(events.NodeAggregate("n-00"), events.NodeRetired{Name: "n-00", RetiredAt: time.Now()})
	c := mesh.Fold()
	h := Over(c)
	change := func(zone string) {
		mesh.Publish(events.NodeAggregate("n-07"), events.NodeChanged{Name: "n-07", Capabilities: []string{}, Labels: map[string]string{"zone": zone}})
		<-mesh.JS.PublishAsyncComplete()
		state, err := mesh.Store.State(ctx)
		must(t, err)
		must(t, c.Proj.WaitFor(ctx, state.LastSeq))
	}
	for _, zone := range []string{"a", "b"} {
		change(zone)
		_, err := h.Status(ctx, wire.StatusRequest{})
		must(t, err)
		must(t, c.Proj.Read(func(v *projections.View) error {
			if ok, _ := h.world.EachAssignedAt(v.CompositionVersion(), func(_, _, _ string) error { return nil }); !ok {
				t.Fatal("the status after a change left no assignments at its version: held read every row")
			}
			fast, err := h.holdsAll(v)
			must(t, err)
			full, err := holdsOf(v, "")
			must(t, err)
			delete(full, "n-00") // retired: composition reads it not, status shows it not
			if !maps.Equal(fast, full) {
				t.Fatalf("after zone %s held from composition's assignments\n%v\nfrom every row\n%v", zone, fast, full)
			}
			said := fmt.Sprint(fast)
			for _, want := range []string{"is pinned to", "policy auto", "policy manual", "tmp build"} {
				if !strings.Contains(said, want) {
					t.Fatalf("no node holds by %q: the test covers less than it says: %v", want, fast)
				}
			}
			return nil
		}))
	}
}
