package aggregates

import (
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/manifest"
)

// Module is a module's consistency boundary: the builds registered under its
// name, the latest of which an assignment takes.
type Module struct {
	Name    string
	Builds  []string
	Latest  string
	Version uint64
}

// RegisterModule enters a parsed manifest's build into the catalogue.
type RegisterModule struct {
	Manifest manifest.Manifest
}

// NewModule is the empty aggregate for name.
func NewModule(name string) *Module { return &Module{Name: name} }

// Apply folds one of the module's events.
func (m *Module) Apply(rec events.Recorded) {
	if ev, ok := rec.Event.(events.ModuleRegistered); ok {
		m.Builds = append(m.Builds, ev.Build)
		m.Latest = ev.Build
	}
	m.Version = rec.Seq
}

// Decide answers the registration, or nothing when this content is already
// the latest build. Registering an older build again makes it the latest:
// that is how a change is rolled back.
func (m *Module) Decide(cmd RegisterModule) ([]events.Event, error) {
	b := cmd.Manifest.Build()
	if b == m.Latest {
		return nil, nil
	}
	return []events.Event{events.ModuleRegistered{Module: cmd.Manifest.Module, Build: b, Manifest: cmd.Manifest.Canonical()}}, nil
}
