package admit

import (
	"encoding/json"
	"slices"

	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/projections/rows"
)

// A standing says that a provider on a machine fails a consumer of it, and
// it holds the rollouts of both modules (rule 23). So it is a fact only
// when it can be true (issue 29): the provider is assigned to the machine
// that reports it, and the consumer is assigned somewhere and resolved to
// that provider, as composition resolves it: it consumes a requirement the
// provider's build provides, and no other hostable provider of that
// requirement is there to choose. Anything else is foreign (rule 19), so a
// node cannot hold the rollout of a module it has nothing to do with.

// Placements is what the standing rule reads of the read models, as they
// stand at the standing's place in the log (the fold's batch, which holds
// every event before it) or at a view's instant.
type Placements interface {
	// Node reads a node's row.
	Node(name string) (rows.Node, bool, error)
	// Failing says whether the triple has a standing now.
	Failing(provider, machine, consumer string) (bool, error)
	// AssignedTo lists the nodes module is assigned to, by name.
	AssignedTo(module string) ([]string, error)
	// AssignedBuild is the build of module's assignment on node.
	AssignedBuild(node, module string) (string, bool, error)
	// Modules lists the catalogue's modules, by name.
	Modules() ([]string, error)
	// Builds lists module's builds, as the catalogue holds them.
	Builds(module string) ([]string, error)
	// Manifest reads the canonical bytes a build was registered with.
	Manifest(module, build string) ([]byte, bool, error)
	// Detected lists the capabilities node's agent last detected.
	Detected(node string) ([]string, error)
}

// shape is what of a build's manifest resolution reads.
type shape struct {
	Requires []string `json:"requires"`
	Provides []string `json:"provides"`
	Consumes []string `json:"consumes"`
}

// Shapes remember each build's shape, by module and build. A build's
// canonical bytes never change, so a shape is remembered for good: the
// fold keeps one Shapes for all it folds, a view a fresh one per question.
type Shapes map[string]shape

// rememberShapes bounds the shapes a Shapes keeps: a few hundred bytes a
// build, and a mesh registers far fewer.
const rememberShapes = 4096

// placing is one module on one node, with its build's shape.
type placing struct {
	node, module string
	shape        shape
}

// rule reads what the rule needs through p, remembering shapes.
type rule struct {
	p      Placements
	shapes Shapes
}

// Standing holds a standing of provider on machine toward consumer to
// the rule (see below); it answers why it is foreign, or nil. An error
// reading the read models is the second result.
func Standing(p Placements, shapes Shapes, provider, machine, consumer string, recovery bool) (foreign, err error) {
	s := rule{p: p, shapes: shapes}
	// A recovery of a triple that is failing is always a fact: the
	// provider may have moved away since, and its standing must still be
	// clearable.
	if recovery {
		found, err := p.Failing(provider, machine, consumer)
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
	nodes, err := p.AssignedTo(consumer)
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
func (s *rule) onlyProvider(r string, cons, prov placing) (bool, error) {
	if ok, err := s.hostable(prov); err != nil || !ok {
		return false, err
	}
	modules, err := s.p.Modules()
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
		nodes, err := s.p.AssignedTo(m)
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
func (s *rule) placed(node, module string) (placing, bool, error) {
	n, found, err := s.p.Node(node)
	if err != nil || !found || n.Retired {
		return placing{}, false, err
	}
	build, found, err := s.p.AssignedBuild(node, module)
	if err != nil || !found {
		return placing{}, false, err
	}
	shape, err := s.shape(module, build)
	return placing{node: node, module: module, shape: shape}, err == nil, err
}

// shape reads what a build provides, consumes and requires. A build the
// catalogue does not hold (yet) has none: composition cannot compose it
// either.
func (s *rule) shape(module, build string) (shape, error) {
	ref := module + "\x00" + build
	if sh, ok := s.shapes[ref]; ok {
		return sh, nil
	}
	var sh shape
	b, found, err := s.p.Manifest(module, build)
	if err != nil || !found {
		return sh, err
	}
	if json.Unmarshal(b, &sh) != nil {
		sh = shape{}
	}
	if len(s.shapes) >= rememberShapes {
		clear(s.shapes)
	}
	s.shapes[ref] = sh
	return sh, nil
}

// someBuildProvides says whether any build of module provides r.
func (s *rule) someBuildProvides(module, r string) (bool, error) {
	builds, err := s.p.Builds(module)
	if err != nil {
		return false, err
	}
	for _, b := range builds {
		sh, err := s.shape(module, b)
		if err != nil || slices.Contains(sh.Provides, r) {
			return err == nil, err
		}
	}
	return false, nil
}

// hostable says whether p's node has every capability its build requires,
// declared or detected, as composition asks.
func (s *rule) hostable(p placing) (bool, error) {
	if len(p.shape.Requires) == 0 {
		return true, nil
	}
	n, _, err := s.p.Node(p.node)
	if err != nil {
		return false, err
	}
	detected, err := s.p.Detected(p.node)
	if err != nil {
		return false, err
	}
	for _, r := range p.shape.Requires {
		if !slices.Contains(n.Capabilities, r) && !slices.Contains(detected, r) {
			return false, nil
		}
	}
	return true, nil
}
