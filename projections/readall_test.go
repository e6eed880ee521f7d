package projections

import "time"

// Snapshot is every read model at once, for comparing two folds of one stream.
type Snapshot struct {
	Checkpoint  uint64
	Nodes       []Node
	Modules     []ModuleRow
	Manifests   map[string]string // module/build -> canonical bytes
	Assignments []AssignmentRow
	ByModule    map[string][]string
	Standings   []Standing
	Composition uint64
	History     map[string][]HistoryEntry
	Foreign     []ForeignMessage
	ReportKeys  map[string]string
}

// Snapshot reads every read model from one view.
func (e *Engine) Snapshot() (s Snapshot, err error) {
	err = e.Read(func(v *View) error {
		s.Checkpoint = v.Checkpoint()
		if s.Nodes, err = v.Nodes(); err != nil {
			return err
		}
		if s.Modules, err = v.Modules(); err != nil {
			return err
		}
		s.Manifests, s.ByModule = map[string]string{}, map[string][]string{}
		for _, m := range s.Modules {
			for _, b := range m.Builds {
				raw, _, err := v.Manifest(m.Name, b.Build)
				if err != nil {
					return err
				}
				s.Manifests[m.Name+"/"+b.Build] = string(raw)
			}
			if s.ByModule[m.Name], err = v.AssignedTo(m.Name); err != nil {
				return err
			}
		}
		if s.Standings, err = v.Standings(); err != nil {
			return err
		}
		s.Composition = v.CompositionVersion()
		s.History, s.ReportKeys = map[string][]HistoryEntry{}, map[string]string{}
		for _, n := range s.Nodes {
			if s.History[n.Name], err = v.History(n.Name, time.Time{}, time.Time{}); err != nil {
				return err
			}
			if s.ReportKeys[n.Name], err = v.ReportKey(n.Name); err != nil {
				return err
			}
		}
		if s.Foreign, err = v.Foreign(); err != nil {
			return err
		}
		s.Assignments, err = v.Assignments()
		return err
	})
	return s, err
}
