package admit_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/meshctl/mesh/embedded/embeddedtest"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/events/store"
	"github.com/meshctl/mesh/projections"
	"github.com/meshctl/mesh/projections/foldtest"
)

// TestMain runs the tests with their temporary directories in memory where
// the box allows (see embeddedtest.Main).
func TestMain(m *testing.M) { os.Exit(embeddedtest.Main(m)) }

// mesh is a stream the controller appends to and read models that fold it.
type mesh struct {
	t        *testing.T
	s        *store.Store
	e        *projections.Engine
	versions map[events.AggregateID]uint64
	last     uint64
}

func newMesh(t *testing.T) *mesh {
	t.Helper()
	keys := foldtest.Keys(t)
	s := foldtest.Stream(t, keys)
	e, _, err := projections.Open(context.Background(), projections.Options{Dir: "proj", FS: vfs.NewMem(), Store: s, Keys: keys})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	e.Start()
	return &mesh{t: t, s: s, e: e, versions: map[events.AggregateID]uint64{}}
}

// append appends ev to agg as the controller, and answers its sequence.
func (m *mesh) append(agg events.AggregateID, ev events.Event) uint64 {
	m.t.Helper()
	v, err := m.s.Append(context.Background(), agg, m.versions[agg], fmt.Sprintf("command-%d", m.last+1), ev)
	if err != nil {
		m.t.Fatal(err)
	}
	m.versions[agg], m.last = v, v
	return v
}

// folded waits until the read models hold everything appended.
func (m *mesh) folded() {
	m.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := m.e.WaitFor(ctx, m.last); err != nil {
		m.t.Fatal(err)
	}
}

// placed folds a small mesh: postgres provides postgres on db-1 and on
// gpu-1 (whose build there needs a capability gpu-1 lacks), app consumes
// postgres on app-1, greeter consumes nothing on web-1, and old-1, which
// ran postgres, is retired.
func placed(t *testing.T) *mesh {
	m := newMesh(t)
	register := func(module, build, manifest string) {
		m.append(events.ModuleAggregate(module), events.ModuleRegistered{Module: module, Build: build, Manifest: []byte(manifest)})
	}
	register("postgres", "pg1", `{"module":"postgres","requires":["linux"],"provides":["postgres"]}`)
	register("postgres", "pg2", `{"module":"postgres","requires":["cuda"],"provides":["postgres"]}`)
	register("app", "a1", `{"module":"app","consumes":["postgres"]}`)
	register("greeter", "g1", `{"module":"greeter","provides":["greeting"]}`)
	for node, modules := range map[string]map[string]string{
		"db-1": {"postgres": "pg1"}, "gpu-1": {"postgres": "pg2"}, "app-1": {"app": "a1"},
		"web-1": {"greeter": "g1"}, "old-1": {"postgres": "pg1"},
	} {
		agg := events.NodeAggregate(node)
		m.append(agg, events.NodeEnrolled{Name: node, Capabilities: []string{"linux"}})
		for module, build := range modules {
			m.append(agg, events.ModuleAssigned{Node: node, Module: module, Build: build})
		}
	}
	m.append(events.NodeAggregate("old-1"), events.NodeRetired{Name: "old-1"})
	m.folded()
	return m
}

// Each event the controller appends, held to what the read models hold at
// its place in the log: admitted and folded, or set aside as foreign with
// why. Fails when any is judged otherwise.
func TestAnEventIsHeldToTheReadModels(t *testing.T) {
	m := placed(t)
	token := events.AggregateID{Kind: events.KindToken, ID: "t-1"}
	cases := []struct {
		name    string
		agg     events.AggregateID
		ev      events.Event
		foreign string // "" when admitted
	}{
		{"an assignment on an active node", events.NodeAggregate("web-1"), events.ModuleAssigned{Node: "web-1", Module: "app", Build: "a1"}, ""},
		{"an enrolment of a node enrolled already", events.NodeAggregate("db-1"), events.NodeEnrolled{Name: "db-1"}, "enrolled already at event"},
		{"a retirement of a node never enrolled", events.NodeAggregate("ghost-1"), events.NodeRetired{Name: "ghost-1"}, "which was never enrolled"},
		{"an assignment on a retired node", events.NodeAggregate("old-1"), events.ModuleAssigned{Node: "old-1", Module: "app", Build: "a1"}, "retired at"},
		{"a retired node's secret forgotten", events.NodeAggregate("old-1"), events.SecretForgotten{Node: "old-1"}, ""},
		{"a use of a token never created", token, events.TokenUsed{ID: "t-1", Node: "db-1"}, "never created"},
		{"a use of a token created", token, events.TokenUsed{ID: "t-1", Node: "db-1"}, ""},
	}
	seqs := make([]uint64, len(cases))
	for i, c := range cases {
		if c.name == "a use of a token created" {
			m.append(token, events.TokenCreated{ID: "t-1"})
		}
		seqs[i] = m.append(c.agg, c.ev)
	}
	m.folded()
	for i, c := range cases {
		var row projections.ForeignMessage
		var found bool
		err := m.e.Read(func(v *projections.View) (err error) {
			row, found, err = v.ForeignAt(seqs[i])
			return err
		})
		switch {
		case err != nil:
			t.Fatal(err)
		case c.foreign == "" && found:
			t.Errorf("%s: set aside as foreign (%s), want it folded", c.name, row.Reason)
		case c.foreign != "" && (!found || !strings.Contains(row.Reason, c.foreign)):
			t.Errorf("%s: judged %q (foreign: %v), want foreign: %s", c.name, row.Reason, found, c.foreign)
		}
	}
}

// The standing rule, case by case, over read models the fold wrote: a
// standing is a fact only of a provider assigned to its machine toward a
// consumer resolved to it. Fails when any case is judged otherwise.
func TestTheStandingRule(t *testing.T) {
	m := placed(t)
	for _, c := range []struct {
		name                        string
		provider, machine, consumer string
		recovery                    bool
		foreign                     string // "" when the standing is a fact
	}{
		{"the only hostable provider toward its consumer", "postgres", "db-1", "app", false, ""},
		{"a recovery of it", "postgres", "db-1", "app", true, ""},
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
			err := m.e.Read(func(v *projections.View) (err error) {
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
