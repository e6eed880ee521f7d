package projections

import (
	"encoding/json"
	"errors"
	"slices"

	"github.com/cockroachdb/pebble/v2"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/projections/rows"
)

// A standing says that a provider on a machine fails a consumer of it, and
// it holds the rollouts of both modules (rule 23). So it is a fact only
// when it can be true (issue 29): the provider is assigned to the machine
// that reports it, and the consumer is assigned somewhere and resolved to
// that provider, as composition resolves it: it consumes a requirement
// the provider's build provides, and no other hostable provider of that
// requirement is there to choose. Anything else is foreign (rule 19), so a
// node cannot hold the rollout of a module it has nothing to do with.
//
// It is decided from the read models as they stand at the standing's
// place in the log (the fold's batch, which holds every event before it),
// so a replay decides the same. A recovery of a triple that is failing is
// always a fact: the provider may have moved away since, and its standing
// must still be clearable.

// standingShape is what of a build's manifest resolution reads. A build's
// canonical bytes never change, so a shape is remembered for good.
type standingShape struct {
	Requires []string `json:"requires"`
	Provides []string `json:"provides"`
	Consumes []string `json:"consumes"`
}

// rememberShapes bounds the shapes a folder keeps: a few hundred bytes a
// build, and a mesh registers far fewer.
const rememberShapes = 4096

// placing is one module on one node, with its build's shape.
type placing struct {
	node, module string
	shape        standingShape
}

// standingRule reads what the rule needs: the fold's batch and its memory
// of rows (at the standing's place in the log), or a view (the operator's
// report, refused before it is appended).
type standingRule struct {
	r      pebble.Reader
	node   func(name string) (Node, bool, error)
	shapes map[string]standingShape
}

// admitStanding holds a standing to the rule above, at this event of the
// fold; it answers why it is foreign, or nil.
func (f *folder) admitStanding(provider, machine, consumer string, recovery bool) (foreign, err error) {
	s := standingRule{r: f.b, node: f.node, shapes: f.shapes}
	return s.admit(provider, machine, consumer, recovery)
}

// StandingHolds answers why a standing would be set aside as foreign by
// the fold if it were appended now, or nil when it would be a fact.
func (v *View) StandingHolds(provider, machine, consumer string, recovery bool) (foreign, err error) {
	s := standingRule{r: v.r, node: v.Node, shapes: map[string]standingShape{}}
	return s.admit(provider, machine, consumer, recovery)
}

func (s *standingRule) admit(provider, machine, consumer string, recovery bool) (foreign, err error) {
	if recovery {
		found, err := hasKey(s.r, standingKey(provider, machine, consumer))
		if err != nil || found {
			return nil, err
		}
	}
	prov, found, err := s.placed(machine, provider)
	switch {
	case err != nil:
		return nil, err
	case !found:
		return events.Foreignf("a standing of %s on %s, which is not assigned there", provider, machine), nil
	}
	nodes, err := keysUnder(s.r, pairPrefix(prefixAssignByModule, consumer))
	if err != nil {
		return nil, err
	}
	for _, node := range nodes {
		cons, found, err := s.placed(node, consumer)
		if err != nil {
			return nil, err
		}
		if !found || (node == machine && consumer == provider) {
			continue
		}
		if ok, err := s.hostable(cons); err != nil || !ok {
			if err != nil {
				return nil, err
			}
			continue
		}
		for _, r := range cons.shape.Consumes {
			if !slices.Contains(prov.shape.Provides, r) {
				continue
			}
			only, err := s.onlyProvider(r, cons, prov)
			if err != nil || only {
				return nil, err
			}
		}
	}
	return events.Foreignf("a standing of %s on %s toward %s, which is not resolved to it", provider, machine, consumer), nil
}

// onlyProvider says whether prov is the one hostable provider of r that
// could serve cons (compose's candidates: every provider but cons itself).
func (s *standingRule) onlyProvider(r string, cons, prov placing) (bool, error) {
	if ok, err := s.hostable(prov); err != nil || !ok {
		return false, err
	}
	modules, err := keysUnder(s.r, []byte{prefixModule})
	if err != nil {
		return false, err
	}
	for _, m := range modules {
		// Only a module some build of which provides r is read node by
		// node: a module on every machine that provides nothing costs one
		// row here, not one a machine.
		if some, err := s.someBuildProvides(m, r); err != nil || !some {
			if err != nil {
				return false, err
			}
			continue
		}
		nodes, err := keysUnder(s.r, pairPrefix(prefixAssignByModule, m))
		if err != nil {
			return false, err
		}
		for _, n := range nodes {
			if (n == prov.node && m == prov.module) || (n == cons.node && m == cons.module) {
				continue
			}
			other, found, err := s.placed(n, m)
			if err != nil {
				return false, err
			}
			if !found || !slices.Contains(other.shape.Provides, r) {
				continue
			}
			if ok, err := s.hostable(other); err != nil || ok {
				return false, err
			}
		}
	}
	return true, nil
}

// placed reads module's assignment on node, on an active node, with its
// build's shape; found is false when there is none.
func (s *standingRule) placed(node, module string) (placing, bool, error) {
	n, found, err := s.node(node)
	if err != nil || !found || n.Retired {
		return placing{}, false, err
	}
	raw, closer, err := s.r.Get(pairKey(prefixAssign, node, module))
	if errors.Is(err, pebble.ErrNotFound) {
		return placing{}, false, nil
	}
	if err != nil {
		return placing{}, false, err
	}
	a, err := rows.DecodeAssignment(node, module, raw)
	closer.Close()
	if err != nil {
		return placing{}, false, err
	}
	shape, err := s.shape(module, a.Build)
	return placing{node: node, module: module, shape: shape}, err == nil, err
}

// shape reads what a build provides, consumes and requires. A build the
// catalogue does not hold (yet) has none: composition cannot compose it
// either.
func (s *standingRule) shape(module, build string) (standingShape, error) {
	ref := module + "\x00" + build
	if shape, ok := s.shapes[ref]; ok {
		return shape, nil
	}
	var shape standingShape
	b, found, err := getRaw(s.r, pairKey(prefixBuild, module, build))
	if err != nil || !found {
		return shape, err
	}
	if json.Unmarshal(b, &shape) != nil {
		shape = standingShape{}
	}
	if len(s.shapes) >= rememberShapes {
		clear(s.shapes)
	}
	s.shapes[ref] = shape
	return shape, nil
}

// someBuildProvides says whether any build of module provides r.
func (s *standingRule) someBuildProvides(module, r string) (bool, error) {
	var row ModuleRow
	if _, err := getJSON(s.r, moduleKey(module), &row); err != nil {
		return false, err
	}
	for _, b := range row.Builds {
		shape, err := s.shape(module, b.Build)
		if err != nil || slices.Contains(shape.Provides, r) {
			return err == nil, err
		}
	}
	return false, nil
}

// hostable says whether p's node has every capability its build requires,
// declared or detected, as composition asks.
func (s *standingRule) hostable(p placing) (bool, error) {
	if len(p.shape.Requires) == 0 {
		return true, nil
	}
	n, _, err := s.node(p.node)
	if err != nil {
		return false, err
	}
	var facts Facts
	if _, err := getJSON(s.r, append([]byte{prefixFacts}, p.node...), &facts); err != nil {
		return false, err
	}
	for _, r := range p.shape.Requires {
		if !slices.Contains(n.Capabilities, r) && !slices.Contains(facts.Capabilities, r) {
			return false, nil
		}
	}
	return true, nil
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
