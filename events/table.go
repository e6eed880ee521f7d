package events

import (
	"encoding/json"
	"errors"
	"reflect"
)

// The decoder table: event type to its current version, a decoder for that
// version, and an upcaster from each older version to the next. One literal,
// not init() registration, so the whole vocabulary is readable in one place.
//
// Version history (append only, never renumber; a version once written to a
// stream is read for ever):
//
//	2026-12-02  NodeEnrolled v1, NodeRetired v1.
//	2026-12-02  ModuleRegistered v1, ModuleAssigned v1, ModuleUnassigned v1.
//	2026-12-02  DeclarationSent v1, ControllerKeyRecorded v1; reports DeclarationApplied v1,
//	            DeclarationFailed v1, DeclarationRefused v1.
//	2026-12-02  ProviderFailing v1, ProviderRecovered v1.
//	2026-12-03  ReportKeyRecorded v1 (a report); ForeignAcknowledged v1.
//	2026-12-03  CredentialRotated v1, SecretForgotten v1.
//	2026-12-04  reports RuntimeStarted v1, RuntimeExited v1, RuntimeCrashLooping v1, RuntimeSteady v1,
//	            RuntimeStopped v1, DriftFound v1; NodeChanged v1; report NodeFactsReported v1.
//	2026-12-04  RolloutStarted v1, RolloutStep v1.
//	2026-12-04  NetworkSet v1, AddressesAllotted v1, AddressesReleased v1.
//	2026-12-04  SeatTaken v1, SeatHandoverStarted v1, SeatHandedOver v1, SeatReleased v1.
//	2026-12-04  NodeUnreachable v1, NodeReachable v1.
//	2026-12-04  report ApplyInterrupted v1.
//	2026-12-04  TokenCreated v1, TokenUsed v1, TokenRevoked v1, NodeKeysRecorded v1.
//	2026-12-05  NodeFlooded v1; ForeignAcknowledged v1 gains from and to (omitted when 0).
//	2026-12-05  RotationCompleted v1; CredentialRotated v1 gains overlap_until (omitted when zero: no overlap).
//	2026-12-05  reports RuntimeHealthy v1, RuntimeUnhealthy v1; RuntimeStarted v1 gains checked
//	            (omitted when false).
//	2026-12-05  ArtifactStored v1, ArtifactRemoved v1; report RuntimeStarted v1 gains digest (omitted when
//	            the program is no artifact).
//	2026-12-05  OperatorAdded v1, OperatorRemoved v1; every envelope gains by (omitted when empty:
//	            a report, or an event from before operators had names).
var table = map[string]entry{
	"NodeEnrolled":     current[NodeEnrolled](1),
	"NodeRetired":      current[NodeRetired](1),
	"ModuleRegistered": current[ModuleRegistered](1),
	"ModuleAssigned":   current[ModuleAssigned](1),
	"ModuleUnassigned": current[ModuleUnassigned](1),

	"DeclarationSent":       foldView(current[DeclarationSent](1), decodeSentForFold),
	"ControllerKeyRecorded": current[ControllerKeyRecorded](1),
	"DeclarationApplied":    current[DeclarationApplied](1),
	"DeclarationFailed":     current[DeclarationFailed](1),
	"DeclarationRefused":    current[DeclarationRefused](1),

	"ProviderFailing":   current[ProviderFailing](1),
	"ProviderRecovered": current[ProviderRecovered](1),

	"ReportKeyRecorded":   current[ReportKeyRecorded](1),
	"ForeignAcknowledged": current[ForeignAcknowledged](1),
	"NodeFlooded":         current[NodeFlooded](1),

	"CredentialRotated": current[CredentialRotated](1),
	"RotationCompleted": current[RotationCompleted](1),
	"SecretForgotten":   current[SecretForgotten](1),

	"RuntimeStarted":      current[RuntimeStarted](1),
	"RuntimeExited":       current[RuntimeExited](1),
	"RuntimeCrashLooping": current[RuntimeCrashLooping](1),
	"RuntimeSteady":       current[RuntimeSteady](1),
	"RuntimeStopped":      current[RuntimeStopped](1),
	"RuntimeHealthy":      current[RuntimeHealthy](1),
	"RuntimeUnhealthy":    current[RuntimeUnhealthy](1),
	"DriftFound":          current[DriftFound](1),
	"NodeChanged":         current[NodeChanged](1),
	"NodeFactsReported":   current[NodeFactsReported](1),
	"RolloutStarted":      current[RolloutStarted](1),
	"RolloutStep":         current[RolloutStep](1),
	"NetworkSet":          current[NetworkSet](1),
	"AddressesAllotted":   current[AddressesAllotted](1),
	"AddressesReleased":   current[AddressesReleased](1),
	"SeatTaken":           current[SeatTaken](1),
	"SeatHandoverStarted": current[SeatHandoverStarted](1),
	"SeatHandedOver":      current[SeatHandedOver](1),
	"SeatReleased":        current[SeatReleased](1),
	"NodeUnreachable":     current[NodeUnreachable](1),
	"NodeReachable":       current[NodeReachable](1),
	"TokenCreated":        current[TokenCreated](1),
	"TokenUsed":           current[TokenUsed](1),
	"TokenRevoked":        current[TokenRevoked](1),
	"NodeKeysRecorded":    current[NodeKeysRecorded](1),
	"ApplyInterrupted":    current[ApplyInterrupted](1),
	"ArtifactStored":      current[ArtifactStored](1),
	"ArtifactRemoved":     current[ArtifactRemoved](1),
	"OperatorAdded":       current[OperatorAdded](1),
	"OperatorRemoved":     current[OperatorRemoved](1),
}

// foldView gives an entry a cheaper fold-path decoder.
func foldView(e entry, fold func([]byte) (Envelope, Event, error)) entry {
	e.decodeCurrent = fold
	return e
}

// sentForFold is DeclarationSent read by its layout plan: the declaration
// and its signature by the plan's base64 (encoding/json's decoding of them
// was most of folding a push). The fold checks the signature (rule 19) and
// the history index keeps the builds the declaration names.
type sentForFold struct {
	Node          string `json:"node"`
	Sequence      uint64 `json:"sequence"`
	Digest        string `json:"digest"`
	ContentDigest string `json:"content_digest"`
	By            string `json:"by"`
	Resources     int    `json:"resources"`
	Declaration   []byte `json:"declaration"`
	Signature     []byte `json:"signature"`
	Key           string `json:"key"`
	Proof         []byte `json:"proof,omitempty"`
}

var sentForFoldLayout = layoutFor(reflect.TypeFor[sentForFold]())

func decodeSentForFold(raw []byte) (Envelope, Event, error) {
	env, ev, err := decodeCurrent[sentForFold](sentForFoldLayout, raw)
	if err != nil {
		return env, nil, err
	}
	f := ev.(sentForFold)
	return env, DeclarationSent{Node: f.Node, Sequence: f.Sequence, Digest: f.Digest, ContentDigest: f.ContentDigest,
		By: f.By, Resources: f.Resources, Declaration: f.Declaration, Signature: f.Signature, Key: f.Key, Proof: f.Proof}, nil
}

func (sentForFold) EventType() string { return "DeclarationSent" }

// current is the entry of a type whose version v is the only one ever
// written. A type that gains a version gets an entry with upcasters.
func current[T Event](v int) entry {
	l := layoutFor(reflect.TypeFor[T]())
	return entry{current: v, decode: decodeAs[T],
		decodeCurrent: func(raw []byte) (Envelope, Event, error) { return decodeCurrent[T](l, raw) }}
}

type entry struct {
	current int
	decode  func(json.RawMessage) (Event, error)
	// decodeCurrent reads a whole message of the current version in one
	// pass: the fast path of a fold, which spends most of its time here.
	decodeCurrent func([]byte) (Envelope, Event, error)
	// upcasters[v] turns version v's data into version v+1's.
	upcasters map[int]func(json.RawMessage) (json.RawMessage, error)
}

func decodeAs[T Event](data json.RawMessage) (Event, error) {
	var ev T
	if err := json.Unmarshal(data, &ev); err != nil {
		return nil, err
	}
	return ev, nil
}

// DecodeData reads an event's data of the current version of typ, without
// an envelope: for events kept outside the stream before they reach it (an
// agent's reports waiting for the bus).
func DecodeData(typ string, data []byte) (Event, error) {
	e, ok := table[typ]
	if !ok {
		return nil, &DecodeError{Type: typ, Version: 0, Reason: "unknown event type"}
	}
	ev, err := e.decode(data)
	if err != nil {
		return nil, &DecodeError{Type: typ, Version: e.current, Reason: "malformed data: " + err.Error()}
	}
	return ev, nil
}

// decodeCurrent reads a message of T's current version by the fold's fast
// path (its data by the type's layout plan where it has one, else by
// encoding/json), or fails so that the caller takes the general decoder. It never
// decodes on its own terms: a second, laxer decoder (encoding/json matches
// field names without regard to case, and lets a missing "data" decode as a
// zero event) would let a fold accept what Decode refuses. FuzzFastPath
// holds the two to one reading.
func decodeCurrent[T Event](l *layout, raw []byte) (Envelope, Event, error) {
	var ev T
	typ, version, at, by, data, ok := splitEnvelope(raw, ev.EventType())
	if !ok {
		return Envelope{}, nil, errNotFast
	}
	if l == nil || !l.decode(data, &ev) {
		// Anything but Encode's exact layout, read afresh by the reference.
		ev = *new(T)
		if err := json.Unmarshal(data, &ev); err != nil {
			return Envelope{}, nil, err
		}
	}
	return Envelope{Meta: Meta{Type: typ, Version: version, OccurredAt: at, By: by}}, ev, nil
}

var errNotFast = errors.New("events: not laid out as Encode writes")
