package projections

import (
	"errors"

	"github.com/cockroachdb/pebble/v2"
	"github.com/meshctl/mesh/projections/rows"
	"github.com/meshctl/mesh/projections/standing"
)

// A standing is a fact only when it can be true (rule 23, issue 29): the
// rule is package standing's, and reads the rows below. The fold asks it
// at the standing's place in the log, from its batch; a view asks it of
// the operator's report before it is appended; both read the same rows.

// admitStanding holds a standing to the rule at this event of the fold; it
// answers why it is foreign, or nil.
func (f *folder) admitStanding(provider, machine, consumer string, recovery bool) (foreign, err error) {
	return standing.Holds(placements{r: f.b, node: f.node}, f.shapes, provider, machine, consumer, recovery)
}

// StandingHolds answers why a standing would be set aside as foreign by
// the fold if it were appended now, or nil when it would be a fact.
func (v *View) StandingHolds(provider, machine, consumer string, recovery bool) (foreign, err error) {
	return standing.Holds(placements{r: v.r, node: v.Node}, standing.Shapes{}, provider, machine, consumer, recovery)
}

// placements are the rows the rule reads (standing.Placements): from the
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
