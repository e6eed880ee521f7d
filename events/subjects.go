package events

import (
	"fmt"
	"strings"
)

// The subject scheme. Everything lives in one stream, Stream, bound to
// SubjectsAll.
//
// Events the controller decides live under mesh.ev.<kind>.<id>.<type>: the
// aggregate's canonical filter is mesh.ev.<kind>.<id>.> and every checked write
// to that aggregate uses exactly that filter (ARCHITECTURE.md, "Subjects": on
// R3 streams a write under a different filter can slip past an expectation).
//
// Events other parties write (a node's reports, a provider's standing) live
// under mesh.rp.<node>.<type>, so they can never move an aggregate's version
// and never race its expectations.
const (
	Stream          = "MESH"
	EventPrefix     = "mesh.ev"
	ReportPrefix    = "mesh.rp"
	SubjectsEvents  = EventPrefix + ".>"
	SubjectsReports = ReportPrefix + ".>"
)

// The secrets stream (commands/secretstore.go says why it is a stream of
// its own): one salt a message, on SecretPrefix.<id>.
const (
	SecretsStream   = "MESH_SECRETS"
	SecretPrefix    = "mesh.secret"
	SubjectsSecrets = SecretPrefix + ".>"
)

// Aggregate kinds: the second token of an event subject.
const (
	KindNode   = "node"
	KindModule = "module"
)

// AggregateID names one consistency boundary: a kind and an id, both subject tokens.
type AggregateID struct {
	Kind string `json:"kind"`
	ID   string `json:"id"`
}

// NodeAggregate is the aggregate of the node called name.
func NodeAggregate(name string) AggregateID { return AggregateID{Kind: KindNode, ID: name} }

// ModuleAggregate is the aggregate of the module called name: its builds.
func ModuleAggregate(name string) AggregateID { return AggregateID{Kind: KindModule, ID: name} }

func (a AggregateID) String() string { return a.Kind + "/" + a.ID }

// Filter is the aggregate's one canonical subject filter. Every checked append
// to the aggregate expects its last sequence on this exact string.
func (a AggregateID) Filter() string { return EventPrefix + "." + a.Kind + "." + a.ID + ".>" }

// Subject is where an event of type typ on this aggregate is stored.
func (a AggregateID) Subject(typ string) string {
	return EventPrefix + "." + a.Kind + "." + a.ID + "." + typ
}

// Validate refuses an aggregate whose tokens would not be single subject tokens.
func (a AggregateID) Validate() error {
	if a.Kind == "" || strings.ContainsAny(a.Kind, ".*> ") {
		return fmt.Errorf("events: aggregate kind %q is not a subject token", a.Kind)
	}
	return ValidateName(a.Kind, a.ID)
}
