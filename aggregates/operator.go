package aggregates

import (
	"github.com/meshctl/mesh/events"
)

// Operator is one operator's name (issue 33): its role and key while it
// is in the mesh. A removed name may be added again, with a new key: the
// old key stays refused, since the new row names only the new one.
type Operator struct {
	Name    string
	Role    events.Role
	Key     string
	Active  bool
	Version uint64
}

// NewOperator is the operator called name before any of its events.
func NewOperator(name string) *Operator { return &Operator{Name: name} }

// Apply folds one of the operator's events.
func (o *Operator) Apply(rec events.Recorded) {
	switch ev := rec.Event.(type) {
	case events.OperatorAdded:
		o.Role, o.Key, o.Active = ev.Role, ev.Key, true
	case events.OperatorRemoved:
		o.Active = false
	}
	o.Version = rec.Seq
}

// Add decides giving the name role with key: nothing to do when it has
// exactly that already, refused when it is taken by another key or role
// (a role is changed by removing and adding again, so each change is a
// new key someone chose to hand out), when the name is not one an
// operator may take, or when the key is not an operator's public nkey.
func (o *Operator) Add(role events.Role, key string) ([]events.Event, error) {
	if err := events.ValidateName("operator", o.Name); err != nil {
		return nil, Refuse("add operator", o.Name, ErrInvalid, err.Error())
	}
	if events.Reserved(o.Name) {
		return nil, refuse("add operator", o.Name, ErrInvalid, "%s names what the controller does by itself in the log; choose another name", o.Name)
	}
	if _, err := events.ParseRole(string(role)); err != nil {
		return nil, Refuse("add operator", o.Name, ErrInvalid, err.Error())
	}
	if !events.ValidUserKey(key) {
		return nil, refuse("add operator", o.Name, ErrInvalid, "%q is not a user's public nkey (U...); mesh operator add makes one", key)
	}
	switch {
	case o.Active && o.Key == key && o.Role == role:
		return nil, nil
	case o.Active:
		return nil, refuse("add operator", o.Name, ErrNameTaken, "%s is an operator already, role %s; to change its role or key, mesh operator remove %s and add it again", o.Name, o.Role, o.Name)
	}
	return []events.Event{events.OperatorAdded{Name: o.Name, Role: role, Key: key}}, nil
}

// Remove decides taking the operator out of the mesh: nothing to do when
// it is not in it; refused when it is the last admin (admins counts the
// admins in the mesh), since then no one could add or remove operators
// again but by the controller key.
func (o *Operator) Remove(admins int) ([]events.Event, error) {
	switch {
	case o.Version == 0:
		return nil, refuse("remove operator", o.Name, ErrUnknown, "there is no operator of that name; see mesh operator list")
	case !o.Active:
		return nil, nil
	case o.Role == events.RoleAdmin && admins <= 1:
		return nil, refuse("remove operator", o.Name, ErrInvalid, "%s is the mesh's last admin; add another admin first (mesh operator add NAME --role admin)", o.Name)
	}
	return []events.Event{events.OperatorRemoved{Name: o.Name}}, nil
}
