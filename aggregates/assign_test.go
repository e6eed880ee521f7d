package aggregates

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/manifest"
)

func TestAssignDecide(t *testing.T) {
	def := "5432"
	spec := map[string]manifest.Setting{"port": {Default: &def}, "password": {Required: true}}
	enrolled := events.NodeEnrolled{Name: "db-1"}
	assigned := events.ModuleAssigned{Node: "db-1", Module: "postgres", Build: "b1", Settings: map[string]string{"password": "x"}}
	assign := func(build string, settings map[string]string) AssignModule {
		return AssignModule{Node: "db-1", Module: "postgres", Build: build, Spec: spec, Settings: settings}
	}
	withPolicy := func(p events.Policy) AssignModule {
		c := assign("b1", map[string]string{"password": "x"})
		c.Policy = p
		return c
	}
	pinned := events.ModuleAssigned{Node: "db-1", Module: "postgres", Build: "b1", Settings: map[string]string{"password": "x"}, Policy: events.PolicyPinned}
	cases := []struct {
		name    string
		given   []events.Event
		cmd     any
		want    []events.Event
		wantErr error
		say     string
	}{
		{name: "assign", given: []events.Event{enrolled}, cmd: assign("b1", map[string]string{"password": "x"}),
			want: []events.Event{events.ModuleAssigned{Node: "db-1", Module: "postgres", Build: "b1", Settings: map[string]string{"password": "x"}, Policy: events.PolicyManual}}},
		{name: "an assignment from before policies is manual", given: []events.Event{enrolled, assigned}, cmd: withPolicy(events.PolicyManual)},
		{name: "another policy replaces", given: []events.Event{enrolled, assigned}, cmd: withPolicy(events.PolicyPinned), want: []events.Event{pinned}},
		{name: "no policy given keeps it", given: []events.Event{enrolled, pinned}, cmd: assign("b2", map[string]string{"password": "x"}),
			want: []events.Event{events.ModuleAssigned{Node: "db-1", Module: "postgres", Build: "b2", Settings: map[string]string{"password": "x"}, Policy: events.PolicyPinned}}},
		{name: "an unknown policy", given: []events.Event{enrolled}, cmd: withPolicy("sometimes"), wantErr: ErrInvalid, say: "pinned, manual or auto"},
		{name: "same build and settings is already assigned", given: []events.Event{enrolled, assigned}, cmd: assign("b1", map[string]string{"password": "x"})},
		{name: "a new build is an upgrade", given: []events.Event{enrolled, assigned}, cmd: assign("b2", map[string]string{"password": "x"}),
			want: []events.Event{events.ModuleAssigned{Node: "db-1", Module: "postgres", Build: "b2", Settings: map[string]string{"password": "x"}, Policy: events.PolicyManual}}},
		{name: "other settings replace", given: []events.Event{enrolled, assigned}, cmd: assign("b1", map[string]string{"password": "y", "port": "6543"}),
			want: []events.Event{events.ModuleAssigned{Node: "db-1", Module: "postgres", Build: "b1", Settings: map[string]string{"password": "y", "port": "6543"}, Policy: events.PolicyManual}}},
		{name: "unknown node", cmd: assign("b1", nil), wantErr: ErrUnknownNode, say: "no node db-1 is enrolled"},
		{name: "retired node", given: []events.Event{enrolled, events.NodeRetired{Name: "db-1"}}, cmd: assign("b1", nil), wantErr: ErrRetired, say: "retired"},
		{name: "unknown module", given: []events.Event{enrolled}, cmd: assign("", nil), wantErr: ErrUnknownModule, say: "mesh module list"},
		{name: "unknown setting", given: []events.Event{enrolled}, cmd: assign("b1", map[string]string{"password": "x", "colour": "red"}), wantErr: ErrInvalid, say: `no setting "colour"; its settings are password, port`},
		{name: "required setting missing", given: []events.Event{enrolled}, cmd: assign("b1", nil), wantErr: ErrInvalid, say: "--set password=VALUE"},
		{name: "unassign", given: []events.Event{enrolled, assigned}, cmd: UnassignModule{Node: "db-1", Module: "postgres"},
			want: []events.Event{events.ModuleUnassigned{Node: "db-1", Module: "postgres"}}},
		{name: "unassign what is not assigned", given: []events.Event{enrolled}, cmd: UnassignModule{Node: "db-1", Module: "postgres"}},
		{name: "unassign after unassign", given: []events.Event{enrolled, assigned, events.ModuleUnassigned{Node: "db-1", Module: "postgres"}}, cmd: UnassignModule{Node: "db-1", Module: "postgres"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := given("db-1", c.given...).Decide(c.cmd, now)
			if !errors.Is(err, c.wantErr) {
				t.Fatalf("err = %v, want %v", err, c.wantErr)
			}
			if err != nil && !strings.Contains(err.Error(), c.say) {
				t.Fatalf("refusal %q does not say %q", err, c.say)
			}
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Fatalf("events (-want +got):\n%s", diff)
			}
		})
	}
}

func TestModuleRegisterDecide(t *testing.T) {
	v1, _ := manifest.Parse([]byte(`{"module":"app"}`))
	v2, _ := manifest.Parse([]byte(`{"module":"app","requires":["linux"]}`))
	m := NewModule("app")
	evs, _ := m.Decide(RegisterModule{Manifest: v1})
	if len(evs) != 1 || evs[0].(events.ModuleRegistered).Build != v1.Build() {
		t.Fatalf("first registration: %+v", evs)
	}
	m.Apply(events.Recorded{Seq: 1, Event: evs[0]})
	if evs, _ := m.Decide(RegisterModule{Manifest: v1}); len(evs) != 0 {
		t.Fatalf("identical content registered again: %+v", evs)
	}
	evs, _ = m.Decide(RegisterModule{Manifest: v2})
	m.Apply(events.Recorded{Seq: 2, Event: evs[0]})
	// Rolling back to the first content makes it the latest again.
	if evs, _ := m.Decide(RegisterModule{Manifest: v1}); len(evs) != 1 {
		t.Fatalf("rolling back to an older build appended nothing")
	}
}
