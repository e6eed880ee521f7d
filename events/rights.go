package events

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Rule 19, only the rightful writer's word is a fact. Every event type has
// the subjects it may arrive on and the writer who may say it, and the names
// inside it must agree with its subject. Rights is that table; Check holds a
// message to it. The bus enforces the same (busauth/permissions.go), and the
// fold enforces it again, so that an open cluster, a stray writer, or a reply
// subject aimed into the stream cannot change a read model.

// Bounds on what one message may hold (issue 12: a node wrote 40 reports
// of 1 MB in 11 s). The stream refuses a message over MaxEvent; the bus
// refuses a node's publish over MaxReport, and the fold sets aside a report
// over it that arrived another way.
const (
	MaxEvent  = 1 << 20
	MaxReport = 64 << 10
)

// Writer is who may write an event type.
type Writer int

const (
	// ByController: under mesh.ev.<kind>.<id>.<Type>, appended by the
	// controller after a decision. Only the controller's identity may
	// publish there on a closed bus.
	ByController Writer = iota + 1
	// ByNode: under mesh.rp.<node>.<Type>, published by that node's agent
	// (or, for a standing, a provider on it or the controller on the
	// operator's word), and signed (SignatureHeader) by a key the fold
	// checks: a bus permission alone does not hold on an open cluster.
	ByNode
)

// Right is where one event type may arrive and whose name inside must agree
// with the subject.
type Right struct {
	Writer Writer
	// Kind is the aggregate kind of a controller event; "" for reports.
	Kind string
	// Name answers the name inside the event that must equal the subject's
	// id (the aggregate's id, or the reporting node).
	Name func(Event) string
	// Moves is what the event changes beyond its own read model rows
	// (events/moves.go): a field of the table, so no type can be added
	// without saying it.
	Moves Moves
}

// Rights is the table: every type the fold knows, and nothing else.
var Rights = map[string]Right{
	"NodeEnrolled":          {ByController, KindNode, func(e Event) string { return e.(NodeEnrolled).Name }, MovesComposition},
	"NodeRetired":           {ByController, KindNode, func(e Event) string { return e.(NodeRetired).Name }, MovesComposition | MovesGrants},
	"NodeChanged":           {ByController, KindNode, func(e Event) string { return e.(NodeChanged).Name }, MovesComposition},
	"RolloutStarted":        {ByController, KindRollout, func(e Event) string { return e.(RolloutStarted).ID }, MovesNothingElse},
	"RolloutStep":           {ByController, KindRollout, func(e Event) string { return e.(RolloutStep).ID }, MovesNothingElse},
	"NetworkSet":            {ByController, KindNetwork, func(Event) string { return PoolAggregate().ID }, MovesComposition},
	"AddressesAllotted":     {ByController, KindNetwork, func(Event) string { return PoolAggregate().ID }, MovesComposition},
	"AddressesReleased":     {ByController, KindNetwork, func(Event) string { return PoolAggregate().ID }, MovesComposition},
	"SeatTaken":             {ByController, KindSeat, func(e Event) string { return e.(SeatTaken).Seat }, MovesNothingElse},
	"SeatHandoverStarted":   {ByController, KindSeat, func(e Event) string { return e.(SeatHandoverStarted).Seat }, MovesComposition | MovesGrants},
	"SeatHandedOver":        {ByController, KindSeat, func(e Event) string { return e.(SeatHandedOver).Seat }, MovesComposition | MovesGrants},
	"SeatReleased":          {ByController, KindSeat, func(e Event) string { return e.(SeatReleased).Seat }, MovesComposition | MovesGrants},
	"ModuleAssigned":        {ByController, KindNode, func(e Event) string { return e.(ModuleAssigned).Node }, MovesComposition},
	"ModuleUnassigned":      {ByController, KindNode, func(e Event) string { return e.(ModuleUnassigned).Node }, MovesComposition | MovesGrants},
	"DeclarationSent":       {ByController, KindNode, func(e Event) string { return e.(DeclarationSent).Node }, MovesNothingElse},
	"ModuleRegistered":      {ByController, KindModule, func(e Event) string { return e.(ModuleRegistered).Module }, MovesComposition},
	"CredentialRotated":     {ByController, KindModule, func(e Event) string { return e.(CredentialRotated).Provider }, MovesComposition},
	"RotationCompleted":     {ByController, KindModule, func(e Event) string { return e.(RotationCompleted).Provider }, MovesComposition},
	"SecretForgotten":       {ByController, KindNode, func(e Event) string { return e.(SecretForgotten).Node }, MovesComposition},
	"ControllerKeyRecorded": {ByController, KindController, func(Event) string { return ControllerAggregate().ID }, MovesNothingElse},
	"ForeignAcknowledged":   {ByController, KindForeign, func(Event) string { return ForeignAggregate().ID }, MovesNothingElse},
	"NodeFlooded":           {ByController, KindForeign, func(Event) string { return ForeignAggregate().ID }, MovesNothingElse},
	"NodeUnreachable":       {ByController, KindLiveness, func(e Event) string { return e.(NodeUnreachable).Node }, MovesNothingElse},
	"NodeReachable":         {ByController, KindLiveness, func(e Event) string { return e.(NodeReachable).Node }, MovesNothingElse},
	"TokenCreated":          {ByController, KindToken, func(e Event) string { return e.(TokenCreated).ID }, MovesNothingElse},
	"TokenUsed":             {ByController, KindToken, func(e Event) string { return e.(TokenUsed).ID }, MovesNothingElse},
	"TokenRevoked":          {ByController, KindToken, func(e Event) string { return e.(TokenRevoked).ID }, MovesNothingElse},
	"NodeKeysRecorded":      {ByController, KindKeys, func(e Event) string { return e.(NodeKeysRecorded).Node }, MovesComposition},
	"ArtifactStored":        {ByController, KindArtifact, func(e Event) string { return e.(ArtifactStored).Name }, MovesComposition},
	"ArtifactRemoved":       {ByController, KindArtifact, func(e Event) string { return e.(ArtifactRemoved).Name }, MovesComposition},
	"OperatorAdded":         {ByController, KindOperator, func(e Event) string { return e.(OperatorAdded).Name }, MovesNothingElse},
	// A removed operator's live connections are ended (commands/access/grants.go).
	"OperatorRemoved": {ByController, KindOperator, func(e Event) string { return e.(OperatorRemoved).Name }, MovesGrants},

	"DeclarationApplied": {ByNode, "", func(e Event) string { return e.(DeclarationApplied).Node }, MovesNothingElse},
	"DeclarationFailed":  {ByNode, "", func(e Event) string { return e.(DeclarationFailed).Node }, MovesNothingElse},
	"DeclarationRefused": {ByNode, "", func(e Event) string { return e.(DeclarationRefused).Node }, MovesNothingElse},
	"ReportKeyRecorded":  {ByNode, "", func(e Event) string { return e.(ReportKeyRecorded).Node }, MovesNothingElse},
	"ProviderFailing":    {ByNode, "", func(e Event) string { return e.(ProviderFailing).Machine }, MovesNothingElse},
	"ProviderRecovered":  {ByNode, "", func(e Event) string { return e.(ProviderRecovered).Machine }, MovesNothingElse},

	"RuntimeStarted":      {ByNode, "", func(e Event) string { return e.(RuntimeStarted).Node }, MovesNothingElse},
	"RuntimeExited":       {ByNode, "", func(e Event) string { return e.(RuntimeExited).Node }, MovesNothingElse},
	"RuntimeCrashLooping": {ByNode, "", func(e Event) string { return e.(RuntimeCrashLooping).Node }, MovesNothingElse},
	"RuntimeSteady":       {ByNode, "", func(e Event) string { return e.(RuntimeSteady).Node }, MovesNothingElse},
	"RuntimeStopped":      {ByNode, "", func(e Event) string { return e.(RuntimeStopped).Node }, MovesNothingElse},
	"RuntimeHealthy":      {ByNode, "", func(e Event) string { return e.(RuntimeHealthy).Node }, MovesNothingElse},
	"RuntimeUnhealthy":    {ByNode, "", func(e Event) string { return e.(RuntimeUnhealthy).Node }, MovesNothingElse},
	"DriftFound":          {ByNode, "", func(e Event) string { return e.(DriftFound).Node }, MovesNothingElse},
	"NodeFactsReported":   {ByNode, "", func(e Event) string { return e.(NodeFactsReported).Node }, MovesComposition},
	"ApplyInterrupted":    {ByNode, "", func(e Event) string { return e.(ApplyInterrupted).Node }, MovesNothingElse},
}

// AgentReport says whether an event type is the word of a node's agent
// alone, signed by its report key: what a declaration did, what a
// runtime did, what drifted. (A standing may also be a provider's or the
// operator's; a report key's record signs itself.)
func AgentReport(typ string) bool {
	switch typ {
	case "DeclarationApplied", "DeclarationFailed", "DeclarationRefused", "DriftFound", "NodeFactsReported", "ApplyInterrupted",
		"RuntimeStarted", "RuntimeExited", "RuntimeCrashLooping", "RuntimeSteady", "RuntimeStopped",
		"RuntimeHealthy", "RuntimeUnhealthy":
		return true
	}
	return false
}

// ErrForeign marks a message that is not a rightful writer's event: it is
// kept aside (the foreign read model) and never folded.
var ErrForeign = errors.New("a foreign message")

// ForeignError says why a message is foreign.
type ForeignError struct{ Reason string }

func (e *ForeignError) Error() string { return "foreign message: " + e.Reason }
func (e *ForeignError) Unwrap() error { return ErrForeign }

// Foreignf makes the error that names why a message is foreign.
func Foreignf(format string, args ...any) error {
	return &ForeignError{Reason: fmt.Sprintf(format, args...)}
}

// Subject is a stream subject read as the scheme says: a controller event's
// kind and id, or a report's node, and the type in its last token.
type Subject struct {
	Writer    Writer
	Aggregate AggregateID // a controller event's
	Node      string      // a report's
	Type      string
}

// ParseSubject reads a subject of the scheme, or says why it is none.
func ParseSubject(subject string) (Subject, error) {
	// Cut, not Split: every message the fold reads is parsed here, and a
	// slice per message was garbage for nothing.
	if rest, ok := strings.CutPrefix(subject, EventPrefix+"."); ok {
		kind, rest, ok1 := strings.Cut(rest, ".")
		id, typ, ok2 := strings.Cut(rest, ".")
		if ok1 && ok2 && kind != "" && id != "" && typ != "" && !strings.Contains(typ, ".") {
			return Subject{Writer: ByController, Aggregate: AggregateID{Kind: kind, ID: id}, Type: typ}, nil
		}
	} else if rest, ok := strings.CutPrefix(subject, ReportPrefix+"."); ok {
		node, typ, ok := strings.Cut(rest, ".")
		if ok && node != "" && typ != "" && !strings.Contains(typ, ".") {
			return Subject{Writer: ByNode, Node: node, Type: typ}, nil
		}
	}
	return Subject{}, Foreignf("subject %s is not one the mesh writes", subject)
}

// Touches is the node a subject is about, if any: the report's node, or the
// id of a node aggregate. Audit names the foreign messages that touch a node.
func (s Subject) Touches() string {
	if s.Writer == ByNode {
		return s.Node
	}
	if s.Aggregate.Kind == KindNode {
		return s.Aggregate.ID
	}
	return ""
}

// Check holds one decoded event to its right: the type is on a subject of
// its writer and of its aggregate's kind, the subject's last token is its
// type, and the name inside is the subject's. A nil error is not yet proof
// of the writer: signatures are checked beside it (a report's by the fold, a
// declaration's against the controller key in force).
func Check(subject string, env Envelope, ev Event) error {
	s, err := ParseSubject(subject)
	if err != nil {
		return err
	}
	typ := ev.EventType()
	r, ok := Rights[typ]
	switch {
	case !ok:
		return Foreignf("%s is not an event type this controller folds", typ)
	case s.Type != typ || env.Type != typ:
		return Foreignf("a %s on subject %s, which is for %s", typ, subject, s.Type)
	case r.Writer != s.Writer && r.Writer == ByController:
		return Foreignf("a %s under %s, where only nodes report: only the controller writes it", typ, ReportPrefix)
	case r.Writer != s.Writer:
		return Foreignf("a %s under %s, where only the controller writes: it is a node's report", typ, EventPrefix)
	case r.Writer == ByController && s.Aggregate.Kind != r.Kind:
		return Foreignf("a %s on a %s aggregate, where it belongs to a %s", typ, s.Aggregate.Kind, r.Kind)
	case r.Writer == ByController && env.Aggregate != (AggregateID{}) && env.Aggregate != s.Aggregate:
		return Foreignf("its envelope names aggregate %s, its subject %s", env.Aggregate, s.Aggregate)
	}
	id := s.Node
	if r.Writer == ByController {
		id = s.Aggregate.ID
	}
	if name := r.Name(ev); name != id {
		return Foreignf("a %s naming %q on %s's subject", typ, name, id)
	}
	return nil
}

// ErrNewer marks an event a newer controller wrote: a well-formed event of a
// type or version this binary does not know, on a subject only controllers
// write. It is not foreign, and it cannot be folded: the fold stops at it
// and the controller serves what it can read until it is upgraded (rule 19).
var ErrNewer = errors.New("a newer controller wrote it")

// NewerError names the event a newer controller wrote.
type NewerError struct {
	Decode *DecodeError
}

func (e *NewerError) Error() string {
	return fmt.Sprintf("it is a %s (version %d), which this controller does not know", e.Decode.Type, e.Decode.Version)
}
func (e *NewerError) Unwrap() error { return ErrNewer }

// Read decodes a stored message and holds it to its right (Check). It
// answers the event, or a *ForeignError for a message that is no mesh event
// or is out of its place, or a *NewerError for a newer controller's event.
// Only the last stops a fold; a foreign message is set aside and the fold
// goes on, so that one message from a stray writer can never stop it.
func Read(subject string, raw []byte) (Envelope, Event, error) {
	env, ev, err := DecodeFromSubject(subject, raw)
	return classify(subject, env, ev, err)
}

// ReadWhole is Read with the whole envelope (its id and command id), which
// the fold's fast path leaves out: for loading an aggregate.
func ReadWhole(subject string, raw []byte) (Envelope, Event, error) {
	env, ev, err := Decode(raw)
	return classify(subject, env, ev, err)
}

func classify(subject string, env Envelope, ev Event, err error) (Envelope, Event, error) {
	if err != nil {
		var de *DecodeError
		s, serr := ParseSubject(subject)
		if errors.As(err, &de) && de.Unknown && serr == nil && s.Writer == ByController && s.Type == de.Type {
			return env, nil, &NewerError{Decode: de}
		}
		return env, nil, Foreignf("it is not a mesh event this controller can read (%v)", err)
	}
	return env, ev, Check(subject, env, ev)
}

// ReportTypes are the types a node may publish, each on its own subject.
func ReportTypes() []string {
	var out []string
	for typ, r := range Rights {
		if r.Writer == ByNode {
			out = append(out, typ)
		}
	}
	slices.Sort(out)
	return out
}
