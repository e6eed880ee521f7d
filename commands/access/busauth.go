package access

import (
	"fmt"

	"github.com/meshctl/mesh/busauth"
	"github.com/meshctl/mesh/compose"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/manifest"
	"github.com/meshctl/mesh/projections"
)

// directory is what the bus authority (busauth) asks of the read models
// when it decides a connection on a closed bus (rule 18).
type directory struct{ h *Service }

var _ busauth.Directory = directory{}

// ActiveNode answers from the node's row.
func (d directory) ActiveNode(node string) error {
	row, found, err := d.h.Proj.Node(node)
	switch {
	case err != nil:
		return err
	case !found:
		return fmt.Errorf("%s is not enrolled in this mesh", node)
	case row.Retired:
		return fmt.Errorf("%s is retired; enrol it again to bring it back", node)
	}
	return d.h.floodRefusal(node)
}

// Operator finds the operator in the mesh whose key is key (issue 33). An
// error reading the read models lets no one in: the callout refuses.
func (d directory) Operator(key string) (string, events.Role, bool) {
	var o projections.Operator
	var ok bool
	err := d.h.Proj.Read(func(v *projections.View) (err error) { o, ok, err = v.OperatorByKey(key); return err })
	return o.Name, o.Role, ok && err == nil
}

// OperatorNamed says whether name is in the mesh now; a read that fails
// says yes, so a sweep cuts no one on a fault of its own.
func (d directory) OperatorNamed(name string) bool {
	var o projections.Operator
	var found bool
	err := d.h.Proj.Read(func(v *projections.View) (err error) { o, found, err = v.Operator(name); return err })
	return err != nil || found && !o.Removed
}

// ModuleKey is derived from the controller key, as the agent's is.
func (d directory) ModuleKey(node, module string) string {
	pub, _ := d.h.Keys.Module(node, module)
	return pub
}

// NodeBus answers the bus key node's agent made, if it made one.
func (d directory) NodeBus(node string) (string, bool, error) {
	var k projections.NodeKeys
	var own bool
	err := d.h.Proj.Read(func(v *projections.View) (err error) { k, own, err = v.NodeKeys(node); return err })
	return k.Bus, own, err
}

// Enrolling checks the token as the enrolment will.
func (d directory) Enrolling(node, token string) error {
	return d.h.Proj.Read(func(v *projections.View) error {
		_, err := checkToken(v, token, node, d.h.Now())
		return err
	})
}

// RunningModule reads the node, its assignment of module and the seats
// it holds in one view, so the grant is of one moment of the read models.
func (d directory) RunningModule(node, module string) (manifest.Manifest, []string, error) {
	// Its standings are on its node's report subjects, which a flood closed.
	if err := d.h.floodRefusal(node); err != nil {
		return manifest.Manifest{}, nil, err
	}
	var m manifest.Manifest
	var seats []string
	err := d.h.Proj.Read(func(v *projections.View) error {
		held, err := v.Seats()
		if err != nil {
			return err
		}
		for _, s := range held {
			if s.Node == node && s.Module == module && s.HandoverTo == "" {
				seats = append(seats, s.Seat)
			}
		}
		row, found, err := v.Node(node)
		switch {
		case err != nil:
			return err
		case !found || row.Retired:
			return fmt.Errorf("%s is not an active node of this mesh", node)
		}
		as, err := v.AssignmentsOf(node)
		if err != nil {
			return err
		}
		for _, a := range as {
			if a.Module != module {
				continue
			}
			got, found, err := d.h.world.Manifest(v, compose.BuildRef{Module: a.Module, Build: a.Build})
			if err != nil || !found {
				return fmt.Errorf("the build of %s assigned to %s cannot be read", module, node)
			}
			if got.Run == nil {
				return fmt.Errorf("%s on %s does not run (its build has no run)", module, node)
			}
			m = got
			return nil
		}
		return fmt.Errorf("%s is not assigned to %s", module, node)
	})
	return m, seats, err
}
