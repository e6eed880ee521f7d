package standing_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/meshctl/mesh/declaration"
	"github.com/meshctl/mesh/embedded/embeddedtest"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/events/store"
	"github.com/meshctl/mesh/projections"
	"github.com/nats-io/nkeys"
)

// TestMain runs the tests with their temporary directories in memory where
// the box allows (see embeddedtest.Main).
func TestMain(m *testing.M) { os.Exit(embeddedtest.Main(m)) }

// placedMesh folds a small mesh into real read models: postgres provides
// postgres on db-1 and on gpu-1 (whose build there needs a capability
// gpu-1 lacks), app consumes postgres on app-1, greeter consumes nothing
// on web-1, and old-1, which ran postgres, is retired.
func placedMesh(t *testing.T) *projections.Engine {
	t.Helper()
	kp, err := nkeys.CreateAccount()
	if err != nil {
		t.Fatal(err)
	}
	keys, err := declaration.NewKeyring(kp)
	if err != nil {
		t.Fatal(err)
	}
	s, _, err := store.Open(context.Background(), embeddedtest.Conn(t, embeddedtest.Server(t)), store.StreamConfig{})
	if err != nil {
		t.Fatal(err)
	}
	s.MAC = keys.LogMAC()
	ctx := context.Background()
	versions := map[events.AggregateID]uint64{}
	var last uint64
	appendTo := func(agg events.AggregateID, ev events.Event) {
		t.Helper()
		v, err := s.Append(ctx, agg, versions[agg], fmt.Sprintf("command-%d", last+1), ev)
		if err != nil {
			t.Fatal(err)
		}
		versions[agg], last = v, v
	}
	register := func(module, build, manifest string) {
		appendTo(events.ModuleAggregate(module), events.ModuleRegistered{Module: module, Build: build, Manifest: []byte(manifest)})
	}
	register("postgres", "pg1", `{"module":"postgres","requires":["linux"],"provides":["postgres"]}`)
	register("postgres", "pg2", `{"module":"postgres","requires":["cuda"],"provides":["postgres"]}`)
	register("app", "a1", `{"module":"app","consumes":["postgres"]}`)
	register("greeter", "g1", `{"module":"greeter","provides":["greeting"]}`)
	for node, placed := range map[string]map[string]string{
		"db-1": {"postgres": "pg1"}, "gpu-1": {"postgres": "pg2"}, "app-1": {"app": "a1"},
		"web-1": {"greeter": "g1"}, "old-1": {"postgres": "pg1"},
	} {
		agg := events.NodeAggregate(node)
		appendTo(agg, events.NodeEnrolled{Name: node, Capabilities: []string{"linux"}})
		for module, build := range placed {
			appendTo(agg, events.ModuleAssigned{Node: node, Module: module, Build: build})
		}
	}
	appendTo(events.NodeAggregate("old-1"), events.NodeRetired{Name: "old-1"})
	e, _, err := projections.Open(ctx, projections.Options{Dir: "proj", FS: vfs.NewMem(), Store: s, Keys: keys})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	e.Start()
	wait, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := e.WaitFor(wait, last); err != nil {
		t.Fatal(err)
	}
	return e
}

// The rule, case by case, over read models the fold wrote: a standing is
// a fact only of a provider assigned to its machine toward a consumer
// resolved to it. Fails when any case is judged otherwise.
func TestTheStandingRule(t *testing.T) {
	e := placedMesh(t)
	for _, c := range []struct {
		name                        string
		provider, machine, consumer string
		recovery                    bool
		foreign                     string // "" when the standing is a fact
	}{
		{"the only hostable provider toward its consumer", "postgres", "db-1", "app", false, ""},
		{"its recovery", "postgres", "db-1", "app", true, ""},
		{"a provider not on the machine", "postgres", "web-1", "app", false, "not assigned there"},
		{"a recovery of nothing not on the machine", "postgres", "web-1", "app", true, "not assigned there"},
		{"a provider on a retired machine", "postgres", "old-1", "app", false, "not assigned there"},
		{"a provider that cannot be hosted there", "postgres", "gpu-1", "app", false, "not resolved to it"},
		{"toward a consumer of nothing it provides", "greeter", "web-1", "app", false, "not resolved to it"},
		{"toward a module that consumes nothing", "postgres", "db-1", "greeter", false, "not resolved to it"},
		{"toward a module assigned nowhere", "postgres", "db-1", "nobody", false, "not resolved to it"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var foreign error
			err := e.Read(func(v *projections.View) (err error) {
				foreign, err = v.StandingHolds(c.provider, c.machine, c.consumer, c.recovery)
				return err
			})
			switch {
			case err != nil:
				t.Fatal(err)
			case c.foreign == "" && foreign != nil:
				t.Fatalf("set aside as foreign (%v), want a fact", foreign)
			case c.foreign != "" && (foreign == nil || !strings.Contains(foreign.Error(), c.foreign)):
				t.Fatalf("judged %v, want foreign: %s", foreign, c.foreign)
			}
		})
	}
}
