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
	patch := func(settings map[string]string, unset []string, reset bool) AssignModule {
		c := assign("b1", settings)
		c.Unset, c.Reset = unset, reset
		return c
	}
	withPort := events.ModuleAssigned{Node: "db-1", Module: "postgres", Build: "b1", Settings: map[string]string{"password": "x", "port": "6543"}}
	withColour := events.ModuleAssigned{Node: "db-1", Module: "postgres", Build: "b0", Settings: map[string]string{"password": "x", "colour": "red"}}
	settled := func(settings map[string]string) []events.Event {
		return []events.Event{events.ModuleAssigned{Node: "db-1", Module: "postgres", Build: "b1", Settings: settings, Policy: events.PolicyManual}}
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
		{name: "a setting not given stays (the README's new password keeps port)", given: []events.Event{enrolled, withPort}, cmd: assign("b1", map[string]string{"password": "y"}),
			want: settled(map[string]string{"password": "y", "port": "6543"})},
		{name: "nothing given is already assigned", given: []events.Event{enrolled, withPort}, cmd: assign("b1", nil)},
		{name: "unset removes one", given: []events.Event{enrolled, withPort}, cmd: patch(nil, []string{"port"}, false),
			want: settled(map[string]string{"password": "x"})},
		{name: "unset what is not set is nothing to do", given: []events.Event{enrolled, assigned}, cmd: patch(nil, []string{"port"}, false)},
		{name: "unset a required setting", given: []events.Event{enrolled, withPort}, cmd: patch(nil, []string{"password"}, false), wantErr: ErrInvalid, say: "setting password is required"},
		{name: "unset an unknown setting", given: []events.Event{enrolled, withPort}, cmd: patch(nil, []string{"colour"}, false), wantErr: ErrInvalid, say: `no setting "colour" to unset`},
		{name: "given and unset", given: []events.Event{enrolled, withPort}, cmd: patch(map[string]string{"port": "1"}, []string{"port"}, false), wantErr: ErrInvalid, say: "not both"},
		{name: "reset starts from the defaults", given: []events.Event{enrolled, withPort}, cmd: patch(map[string]string{"password": "z"}, nil, true),
			want: settled(map[string]string{"password": "z"})},
		{name: "reset drops a required one not given again", given: []events.Event{enrolled, withPort}, cmd: patch(nil, nil, true), wantErr: ErrInvalid, say: "--set password=VALUE"},
		{name: "a setting the new build does not declare is dropped", given: []events.Event{enrolled, withColour}, cmd: assign("b1", nil),
			want: settled(map[string]string{"password": "x"})},
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

func TestSettingChanges(t *testing.T) {
	s := func(v string) *string { return &v }
	cases := []struct {
		name          string
		before, after map[string]string
		want          []SettingChange
	}{
		{name: "none", before: map[string]string{"a": "1"}, after: map[string]string{"a": "1"}},
		{name: "changed, added and removed, by name", before: map[string]string{"b": "1", "c": "x"}, after: map[string]string{"a": "2", "b": "3"},
			want: []SettingChange{{"a", nil, s("2")}, {"b", s("1"), s("3")}, {"c", s("x"), nil}}},
		{name: "an empty value is a value", before: map[string]string{}, after: map[string]string{"greeting": ""},
			want: []SettingChange{{"greeting", nil, s("")}}},
		{name: "a new assignment", before: nil, after: map[string]string{"port": "6543"}, want: []SettingChange{{"port", nil, s("6543")}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if diff := cmp.Diff(c.want, SettingChanges(c.before, c.after)); diff != "" {
				t.Fatalf("changes (-want +got):\n%s", diff)
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
