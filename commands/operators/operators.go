package operators

import (
	"context"
	"fmt"

	"github.com/meshctl/mesh/aggregates"
	"github.com/meshctl/mesh/commands/core"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/projections"
	"github.com/meshctl/mesh/wire"
	"github.com/nats-io/nkeys"
)

// Service is the operators' verbs over one Core.
type Service struct {
	*core.Core
	// Closed: the bus proves who connects (its callout), so a call's
	// caller is the operator whose key it came under; on an open bus
	// nothing is proven and nobody is named.
	Closed bool
	// cut ends the live connections of an operator (nil: an open bus,
	// whose connections hold no grant).
	cut func(ctx context.Context, name string) (int, error)
}

// New is the operators' verbs over c; cut ends an operator's connections.
func New(c *core.Core, cut func(ctx context.Context, name string) (int, error)) *Service {
	return &Service{Core: c, cut: cut}
}

// Add records an operator: its name, role and the public half of the key
// the command made where the operator keeps it.
func (s *Service) Add(ctx context.Context, r wire.OperatorAddRequest) (wire.OperatorChanged, error) {
	if r.Key != "" && !nkeys.IsValidPublicUserKey(r.Key) {
		return wire.OperatorChanged{}, aggregates.Refuse("add operator", r.Name, aggregates.ErrInvalid, "the key is not a user's public nkey; mesh operator add makes one")
	}
	seq, err := core.Decide(ctx, s.Core, "add operator", events.OperatorAggregate(r.Name), r.CommandID,
		func() *aggregates.Operator { return aggregates.NewOperator(r.Name) },
		func(o *aggregates.Operator) ([]events.Event, error) { return o.Add(r.Role, r.Key) })
	if err != nil {
		return wire.OperatorChanged{}, err
	}
	o, err := s.show(r.Name)
	if seq > 0 {
		s.Log.Info("operator added", "name", r.Name, "role", r.Role, "by", events.ByOf(ctx))
	}
	return wire.OperatorChanged{Changed: seq > 0, Seq: seq, Operator: o}, err
}

// Remove takes an operator out of the mesh: its key is refused from the
// next connect on, and its live connections are ended now. The last
// admin stays (no one could manage operators again), and an operator
// does not remove itself (its answer would be cut with its connection).
func (s *Service) Remove(ctx context.Context, r wire.NameRequest) (wire.OperatorChanged, error) {
	if s.Closed && events.ByOf(ctx) == r.Name {
		return wire.OperatorChanged{}, aggregates.Refuse("remove operator", r.Name, aggregates.ErrInvalid, "an operator does not remove itself; another admin does")
	}
	var admins int
	err := s.Proj.Read(func(v *projections.View) error {
		all, err := v.Operators()
		for _, o := range all {
			if !o.Removed && o.Role == events.RoleAdmin {
				admins++
			}
		}
		return err
	})
	if err != nil {
		return wire.OperatorChanged{}, err
	}
	seq, err := core.Decide(ctx, s.Core, "remove operator", events.OperatorAggregate(r.Name), wire.NewCommandID(),
		func() *aggregates.Operator { return aggregates.NewOperator(r.Name) },
		func(o *aggregates.Operator) ([]events.Event, error) { return o.Remove(admins) })
	if err != nil {
		return wire.OperatorChanged{}, err
	}
	out := wire.OperatorChanged{Changed: seq > 0, Seq: seq}
	if out.Operator, err = s.show(r.Name); err != nil {
		return out, err
	}
	if seq > 0 && s.cut != nil {
		// The grant follower ends them too, on every controller; ending
		// them here, once the read models refuse the key, lets the answer
		// say how many, and a reconnect is refused.
		if out.Cut, err = s.cut(ctx, r.Name); err != nil {
			s.Log.Warn("cannot end a removed operator's connections; the grant follower tries too", "name", r.Name, "err", err)
		}
		s.Log.Info("operator removed", "name", r.Name, "by", events.ByOf(ctx), "connections_ended", out.Cut)
	}
	return out, nil
}

// List answers every operator, removed ones included, and who asked.
func (s *Service) List(ctx context.Context, _ wire.Empty) (wire.OperatorList, error) {
	out := wire.OperatorList{Caller: events.ByOf(ctx)}
	err := s.Proj.Read(func(v *projections.View) (err error) {
		out.Operators, err = v.Operators()
		return err
	})
	if out.Operators == nil {
		out.Operators = []wire.Operator{}
	}
	return out, err
}

// Show answers one operator.
func (s *Service) Show(_ context.Context, r wire.NameRequest) (wire.Operator, error) {
	return s.show(r.Name)
}

func (s *Service) show(name string) (wire.Operator, error) {
	var o wire.Operator
	var found bool
	err := s.Proj.Read(func(v *projections.View) (err error) { o, found, err = v.Operator(name); return err })
	if err == nil && !found {
		err = aggregates.Refuse("show operator", name, aggregates.ErrUnknown, "there is no operator of that name; see mesh operator list")
	}
	return o, err
}

// EnsureAdmin makes the first admin of a closed mesh, with key, when the
// log has no operator yet: a mesh's first closed start, or one that ran
// before operators had names, whose home's operator key then goes on
// working as its admin's.
func (s *Service) EnsureAdmin(ctx context.Context, key string) (bool, error) {
	var any bool
	if err := s.Proj.Read(func(v *projections.View) error {
		all, err := v.Operators()
		any = len(all) > 0
		return err
	}); err != nil || any {
		return false, err
	}
	// Derived from the key, so two controllers starting together make
	// the same event, and the second's append is the first's duplicate.
	seq, err := core.Decide(events.WithBy(ctx, events.ActorController), s.Core, "add operator", events.OperatorAggregate(events.AdminName), "first-admin-"+key[:16],
		func() *aggregates.Operator { return aggregates.NewOperator(events.AdminName) },
		func(o *aggregates.Operator) ([]events.Event, error) {
			if o.Version > 0 {
				return nil, nil // added meanwhile, or added and removed: not ours to make again
			}
			return o.Add(events.RoleAdmin, key)
		})
	return seq > 0, err
}

// Authorize decides a call of the verb on subject that came under the
// caller token (wire.CallerOf): the name it is by, or why not. On a
// closed bus the token is the key the bus proved; on an open bus nothing
// is proven, so no one is named and nothing is refused.
func (s *Service) Authorize(caller, subject string) (string, error) {
	if !s.Closed {
		return "", nil
	}
	verb := verbOf(subject)
	if caller == wire.OpenCaller || caller == "" {
		return "", aggregates.Refuse("call", verb, aggregates.ErrForbidden, "this bus is closed, and the call came under no operator's key; connect with one (mesh operator add)")
	}
	var o wire.Operator
	var found bool
	if err := s.Proj.Read(func(v *projections.View) (err error) { o, found, err = v.OperatorByKey(caller); return err }); err != nil {
		return "", err
	}
	if !found {
		return "", aggregates.Refuse("call", verb, aggregates.ErrForbidden, "the key it came under is no operator's in this mesh (removed, or never added); ask an admin for one (mesh operator add)")
	}
	if need := wire.Needs(subject); !o.Role.Allows(need) {
		return "", aggregates.Refuse("call", verb, aggregates.ErrForbidden, fmt.Sprintf(
			"%s is a %s, and %s needs the %s role (an admin gives one with mesh operator add NAME --role %s)", o.Name, o.Role, verb, need, need))
	}
	return o.Name, nil
}

// verbOf is a verb's subject as a person reads it: "node.assign".
func verbOf(subject string) string { return subject[len(wire.APIPrefix)+1:] }
