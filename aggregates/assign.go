package aggregates

import (
	"maps"
	"slices"
	"strings"

	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/manifest"
)

// Commands that change what a node is to hold.
type (
	// AssignModule gives a node the module's latest build. Build and Spec
	// come from the catalogue as the handler read it: Build "" means the
	// catalogue has no such module. It patches: the settings the node
	// holds stay unless Settings gives them again, Unset names them or
	// Reset starts from the manifest's defaults (issue 31: a re-assign
	// with one new setting must not move the others back).
	AssignModule struct {
		Node, Module string
		Build        string
		Spec         map[string]manifest.Setting
		Settings     map[string]string
		Unset        []string
		Reset        bool
		// Policy "" keeps the assignment's policy (manual for a new one).
		Policy events.Policy
	}
	UnassignModule struct {
		Node, Module string
	}
)

// assign refuses what cannot be assigned and answers nothing when the node
// already holds this build with these settings. A capability the node lacks
// does not refuse: capabilities change, and composition leaves the module out
// and says why.
func (n *Node) assign(c AssignModule) ([]events.Event, error) {
	if err := n.changeable("assign", c.Node); err != nil {
		return nil, err
	}
	if c.Build == "" {
		return nil, refuse("assign", c.Module, ErrUnknownModule, "no module of that name is registered; see mesh module list")
	}
	have, ok := n.Assignments[c.Module]
	settings, err := patchSettings(c, have.Settings)
	if err != nil {
		return nil, err
	}
	policy := c.Policy
	if policy == "" {
		policy = have.Policy.Or()
	}
	if _, err := events.ParsePolicy(string(policy)); err != nil {
		return nil, refuse("assign", c.Module, ErrInvalid, "%v; give --policy pinned, manual or auto", err)
	}
	if ok && have.Build == c.Build && maps.Equal(have.Settings, settings) && have.Policy.Or() == policy {
		return nil, nil
	}
	return []events.Event{events.ModuleAssigned{Node: c.Node, Module: c.Module, Build: c.Build, Settings: settings, Policy: policy}}, nil
}

// patchSettings is the settings an assignment holds after c: those held
// (none with Reset), less those unset, with those given over them. One held
// that this build no longer declares is dropped, so an upgrade that removed
// a setting is not refused for a value nobody gave this time.
func patchSettings(c AssignModule, held map[string]string) (map[string]string, error) {
	settings := map[string]string{}
	if !c.Reset {
		for k, v := range held {
			if _, ok := c.Spec[k]; ok {
				settings[k] = v
			}
		}
	}
	for _, k := range c.Unset {
		_, declared := c.Spec[k]
		if _, had := held[k]; !declared && !had {
			return nil, refuse("assign", c.Module, ErrInvalid, "it has no setting %q to unset; its settings are %s", k, settingList(c.Spec))
		}
		if _, both := c.Settings[k]; both {
			return nil, refuse("assign", c.Module, ErrInvalid, "setting %s is both given and unset; give --set or --unset for it, not both", k)
		}
		delete(settings, k)
	}
	for k, v := range c.Settings {
		if _, ok := c.Spec[k]; !ok {
			return nil, refuse("assign", c.Module, ErrInvalid, "it has no setting %q; its settings are %s", k, settingList(c.Spec))
		}
		settings[k] = v
	}
	for _, k := range specNames(c.Spec) {
		if _, given := settings[k]; c.Spec[k].Required && !given {
			return nil, refuse("assign", c.Module, ErrInvalid, "setting %s is required; give --set %s=VALUE", k, k)
		}
	}
	return settings, nil
}

// SettingChange is one setting an assignment changed. Old nil was not set
// (the manifest's default applied), New nil is no longer set: "" is a
// value a setting may be given (--set greeting=).
type SettingChange struct {
	Setting  string
	Old, New *string
}

// SettingChanges is what differs from before to after, by setting name.
func SettingChanges(before, after map[string]string) []SettingChange {
	var out []SettingChange
	for _, k := range slices.Sorted(maps.Keys(mergedKeys(before, after))) {
		old, had := before[k]
		now, has := after[k]
		if had != has || old != now {
			out = append(out, SettingChange{Setting: k, Old: valueIf(old, had), New: valueIf(now, has)})
		}
	}
	return out
}

func valueIf(v string, ok bool) *string {
	if !ok {
		return nil
	}
	return &v
}

func mergedKeys(a, b map[string]string) map[string]bool {
	keys := make(map[string]bool, len(a)+len(b))
	for k := range a {
		keys[k] = true
	}
	for k := range b {
		keys[k] = true
	}
	return keys
}

func (n *Node) unassign(c UnassignModule) ([]events.Event, error) {
	if err := n.changeable("unassign", c.Node); err != nil {
		return nil, err
	}
	if _, ok := n.Assignments[c.Module]; !ok {
		return nil, nil
	}
	return []events.Event{events.ModuleUnassigned{Node: c.Node, Module: c.Module}}, nil
}

// changeable refuses a change to a node that is not enrolled or is retired.
func (n *Node) changeable(op, name string) error {
	if !n.Enrolled {
		return refuse(op, "to "+name, ErrUnknownNode, "no node %s is enrolled; see mesh node list", name)
	}
	if n.Retired {
		return refuse(op, "to "+name, ErrRetired, "%s is retired and can no longer be changed; enroll a new node", name)
	}
	return nil
}

func specNames(spec map[string]manifest.Setting) []string {
	return manifest.Manifest{Settings: spec}.SettingNames()
}

func settingList(spec map[string]manifest.Setting) string {
	if len(spec) == 0 {
		return "none"
	}
	return strings.Join(specNames(spec), ", ")
}
