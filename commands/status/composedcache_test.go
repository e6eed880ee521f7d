package status

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/meshctl/mesh/commands/core/coretest"
	"github.com/meshctl/mesh/commands/world"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/manifest"
	"github.com/meshctl/mesh/projections"
	"github.com/meshctl/mesh/wire"
)

// What status reads after a push is what the push composed (it composed
// every node from the same world), and after an assignment only what the
// change can move is composed again (world.Changed); either way each node
// would be sent exactly what composing the whole mesh afresh says. It
// fails if the push leaves nothing for status, or if what it or the
// recomposition keeps is not what a fresh composition says.
func TestStatusAfterAPushOrAnAssignmentAgreesWithComposingAfresh(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	mesh := coretest.New(t, false)
	builds := map[string]string{}
	for _, text := range []string{
		`{"module":"db","provides":["db"],"provisions":["db"],"settings":{"port":{"default":"5432"}},"resources":[
		  {"kind":"file","path":"/etc/db.conf","mode":"0600","template":"{{.Settings.port}} {{range .Consumers}}{{.Node}}={{.Password}};{{end}}"}]}`,
		`{"module":"web","consumes":["db"],"resources":[
		  {"kind":"file","path":"/etc/web.conf","mode":"0600","template":"{{.Receives.db.Node}}:{{.Receives.db.Settings.port}} {{.Receives.db.Credential.Password}}"}]}`,
		`{"module":"motd","settings":{"message":{"default":"hi"}},"resources":[
		  {"kind":"file","path":"/etc/motd","mode":"0644","template":"{{.Settings.message}} {{.Node.Name}}"}]}`,
	} {
		m, err := manifest.Parse([]byte(text))
		if err != nil {
			t.Fatal(err)
		}
		builds[m.Module] = m.Build()
		mesh.Publish(events.ModuleAggregate(m.Module), events.ModuleRegistered{Module: m.Module, Build: m.Build(), Manifest: m.Canonical()})
	}
	assign := func(node, module string, settings map[string]string) {
		mesh.Publish(events.NodeAggregate(node), events.ModuleAssigned{Node: node, Module: module, Build: builds[module], Settings: settings})
	}
	for i := range 30 {
		name := fmt.Sprintf("n-%02d", i)
		mesh.Publish(events.NodeAggregate(name), events.NodeEnrolled{Name: name, Capabilities: []string{}, Labels: map[string]string{"zone": fmt.Sprint(i % 2)}})
		switch {
		case i < 2:
			assign(name, "db", map[string]string{})
		case i < 20:
			assign(name, "web", map[string]string{})
		default:
			assign(name, "motd", map[string]string{})
		}
	}
	c := mesh.Fold()
	h := Over(c)
	if r, err := h.push.Push(ctx, wire.PushRequest{CommandID: wire.NewCommandID()}); err != nil || len(r.Sent) != 30 {
		t.Fatalf("push: %d sent, %v", len(r.Sent), err)
	}
	var version uint64
	must(t, c.Proj.Read(func(v *projections.View) error { version = v.CompositionVersion(); return nil }))
	if cached, ok := h.world.Cached(); !ok || cached != version {
		t.Fatalf("after a push over every node the would-send cache holds version %d (%v), not the push's %d", cached, ok, version)
	}
	agree := func(after string) {
		t.Helper()
		got, err := h.world.ComposeAll()
		must(t, err)
		want, err := world.New(c).ComposeAll()
		must(t, err)
		names := func(c *world.Composed) []string {
			out := slices.Sorted(func(yield func(string) bool) {
				for n := range c.All() {
					if !yield(n) {
						return
					}
				}
			})
			if len(out) != c.Len() {
				t.Fatalf("after %s the would-sends count %d nodes and hold %d", after, c.Len(), len(out))
			}
			return out
		}
		if g, w := names(got), names(want); !slices.Equal(g, w) {
			t.Fatalf("after %s status composes nodes %v, afresh %v", after, g, w)
		}
		for n, w := range want.All() {
			g := got.Of(n)
			g.Since, w.Since = time.Time{}, time.Time{} // since when a node could not be: the cache remembers longer
			if !reflect.DeepEqual(g, w) {
				t.Fatalf("after %s status says %s would be sent\n%+v\nafresh\n%+v", after, n, g, w)
			}
		}
	}
	agree("the push")
	for _, change := range []struct {
		what string
		do   func()
	}{
		{"a provider's setting", func() { assign("n-01", "db", map[string]string{"port": "6000"}) }},
		{"a consumer assigned", func() { assign("n-25", "web", map[string]string{}) }},
		{"a provider unassigned", func() {
			mesh.Publish(events.NodeAggregate("n-00"), events.ModuleUnassigned{Node: "n-00", Module: "db"})
		}},
		{"a node's own module", func() { assign("n-29", "motd", map[string]string{"message": "bye"}) }},
	} {
		change.do()
		<-mesh.JS.PublishAsyncComplete()
		state, err := mesh.Store.State(ctx)
		must(t, err)
		must(t, c.Proj.WaitFor(ctx, state.LastSeq))
		agree(change.what)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
