package projections

import (
	"errors"

	"github.com/cockroachdb/pebble/v2"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/projections/admit"
	"github.com/meshctl/mesh/projections/rows"
)

// admit holds an event to what the read models know, before any of them
// changes (rule 19's second half, package admit's; provenance did the
// first on a worker). It answers why the event is foreign, or nil.
func (f *folder) admit(rec events.Recorded) (foreign, err error) {
	return admit.Event(admission{f}, f.keys, f.shapes, rec)
}

// StandingHolds answers why a standing would be set aside as foreign by
// the fold if it were appended now, or nil when it would be a fact.
func (v *View) StandingHolds(provider, machine, consumer string, recovery bool) (foreign, err error) {
	return admit.Standing(placements{r: v.r, node: v.Node}, admit.Shapes{}, provider, machine, consumer, recovery)
}

// admission is what admit reads from the fold (admit.Models): its batch,
// through the folder's memories. One pointer, so handing it over as an
// interface, once an event, allocates nothing.
type admission struct{ f *folder }

func (a admission) Node(name string) (Node, bool, error)  { return a.f.node(name) }
func (a admission) ReportKey(node string) (string, error) { return a.f.reportKey(node) }
func (a admission) Token(id string) (bool, error)         { return getJSON(a.f.b, tokenKey(id), &Token{}) }
func (a admission) Placements() admit.Placements          { return placements{r: a.f.b, node: a.f.node} }

func (a admission) OwnKeys(node string) (admit.OwnKeys, bool, error) {
	k, found, err := a.f.ownKeys(node)
	return admit.OwnKeys{Node: k.Node, Bus: k.Bus, Report: k.Report, Seq: k.Seq}, found, err
}

// placements are the rows the standing rule reads (admit.Placements): from the
// fold's batch, with its memory of node rows, or from a view.
type placements struct {
	r    pebble.Reader
	node func(name string) (Node, bool, error)
}

func (p placements) Node(name string) (Node, bool, error) { return p.node(name) }

func (p placements) Failing(provider, machine, consumer string) (bool, error) {
	return hasKey(p.r, standingKey(provider, machine, consumer))
}

func (p placements) AssignedTo(module string) ([]string, error) {
	return keysUnder(p.r, pairPrefix(prefixAssignByModule, module))
}

func (p placements) AssignedBuild(node, module string) (string, bool, error) {
	raw, closer, err := p.r.Get(pairKey(prefixAssign, node, module))
	if errors.Is(err, pebble.ErrNotFound) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	defer closer.Close()
	a, err := rows.DecodeAssignment(node, module, raw)
	return a.Build, err == nil, err
}

func (p placements) Modules() ([]string, error) { return keysUnder(p.r, []byte{prefixModule}) }

func (p placements) Builds(module string) ([]string, error) {
	var row ModuleRow
	if _, err := getJSON(p.r, moduleKey(module), &row); err != nil {
		return nil, err
	}
	builds := make([]string, len(row.Builds))
	for i, b := range row.Builds {
		builds[i] = b.Build
	}
	return builds, nil
}

func (p placements) Manifest(module, build string) ([]byte, bool, error) {
	return getRaw(p.r, pairKey(prefixBuild, module, build))
}

func (p placements) Detected(node string) ([]string, error) {
	var facts Facts
	_, err := getJSON(p.r, append([]byte{prefixFacts}, node...), &facts)
	return facts.Capabilities, err
}

func hasKey(r pebble.Reader, key []byte) (bool, error) {
	_, closer, err := r.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	closer.Close()
	return true, nil
}
