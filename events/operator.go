package events

import (
	"context"
	"fmt"
)

// Operators (issue 33): each person or program that runs commands has a
// name, a role and a key of its own. The key is made where the operator
// keeps it (mesh operator add writes the seed there); the log records only
// its public half, so neither the controller nor a backup can act as an
// operator. The bus's callout and the controller both read the read model
// folded from these events, so what the bus lets a connection ask and what
// the controller lets it do are decided from one record.

// KindOperator is the aggregate kind of an operator: adding and removing
// expect its version, so two admins racing to add one name cannot both win.
const KindOperator = "operator"

// OperatorAggregate is the operator named name.
func OperatorAggregate(name string) AggregateID { return AggregateID{Kind: KindOperator, ID: name} }

// Role is what an operator may do. Each role may do all the one before it may.
type Role string

const (
	// RoleViewer reads: status, lists, history, audit, events.
	RoleViewer Role = "viewer"
	// RoleDeployer also changes what nodes run: assign, push, rollouts,
	// declare, node set.
	RoleDeployer Role = "deployer"
	// RoleAdmin also changes who is in the mesh and how: operators,
	// enrolment, secrets, the network, restore.
	RoleAdmin Role = "admin"
)

// Roles are the roles, weakest first.
var Roles = []Role{RoleViewer, RoleDeployer, RoleAdmin}

// Allows says whether r may do what needs the role need.
func (r Role) Allows(need Role) bool { return r.rank() >= need.rank() && r.rank() > 0 }

func (r Role) rank() int {
	for i, x := range Roles {
		if x == r {
			return i + 1
		}
	}
	return 0
}

// ParseRole reads a role's name, or says which there are.
func ParseRole(s string) (Role, error) {
	if r := Role(s); r.rank() > 0 {
		return r, nil
	}
	return "", fmt.Errorf("%q is not a role: give viewer, deployer or admin", s)
}

// AdminName is the operator the first start of a mesh makes for its home.
const AdminName = "admin"

// OperatorAdded: an admin (or the mesh's first start, for its home) gave
// Name the role Role, connecting with the public nkey Key.
type OperatorAdded struct {
	Name string `json:"name"`
	Role Role   `json:"role"`
	Key  string `json:"key"`
}

func (OperatorAdded) EventType() string { return "OperatorAdded" }

// OperatorRemoved: Name may no longer connect; its live connections are
// ended when the controller folds this (MovesGrants).
type OperatorRemoved struct {
	Name string `json:"name"`
}

func (OperatorRemoved) EventType() string { return "OperatorRemoved" }

// The actors the controller names when it acts by itself, in an event's
// envelope (Meta.By), where an operator's name is when one asked. None is a
// name an operator may take (mesh operator add refuses them), so the log
// never credits a person with what the controller did alone.
const (
	// ActorController: the controller's own decisions (a node heard or
	// not, a rotation's overlap ended, a machine enrolling with its token,
	// its key recorded at start, the first admin).
	ActorController = "controller"
	// ActorReconciler: a send of mesh up --reconcile (rule 27); the same
	// word as DeclarationSent.By's.
	ActorReconciler = ByReconciler
	// ActorRolloutPrefix + a rollout's id: a step its driver took by
	// itself (a wave after the first, a halt, its end).
	ActorRolloutPrefix = "rollout "
)

// Reserved says whether name is one an operator may not take.
func Reserved(name string) bool {
	return name == ActorController || name == ActorReconciler || name == "rollout"
}

type byKey struct{}

// WithBy is ctx carrying who an append made under it is by: the endpoint
// that decided the caller's identity from its connection sets it, and
// every event appended for that call records it (Meta.By), whichever
// service appends. A context is how it reaches every append without each
// verb's signature carrying it.
func WithBy(ctx context.Context, by string) context.Context {
	return context.WithValue(ctx, byKey{}, by)
}

// ByOf is who ctx says its appends are by ("" when nothing said).
func ByOf(ctx context.Context) string {
	by, _ := ctx.Value(byKey{}).(string)
	return by
}

// ValidUserKey says whether key has the shape of a user's public nkey: 'U'
// and 55 more of base32's letters. The shape only: whoever can import
// nkeys checks its checksum too; this keeps a key that could not be a
// subject's token (the caller's token of wire.CallerSubject) out of the log.
func ValidUserKey(key string) bool {
	if len(key) != 56 || key[0] != 'U' {
		return false
	}
	for i := range len(key) {
		if c := key[i]; !(c >= 'A' && c <= 'Z' || c >= '2' && c <= '7') {
			return false
		}
	}
	return true
}
