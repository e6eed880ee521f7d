package aggregates

import (
	"maps"
	"strings"

	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/manifest"
)

// Commands that change what a node is to hold.
type (
	// AssignModule gives a node the module's latest build. Build and Spec
	// come from the catalogue as the handler read it: Build "" means the
	// catalogue has no such module.
	AssignModule struct {
		Node, Module string
		Build        string
		Spec         map[string]manifest.Setting
		Settings     map[string]string
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
	settings := map[string]string{}
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
	have, ok := n.Assignments[c.Module]
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
