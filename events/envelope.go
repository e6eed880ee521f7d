package events

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Event is one fact the mesh recorded. Its type name is past tense and is also
// the last token of its subject.
type Event interface {
	EventType() string
}

// Envelope is what is stored in a stream message: the event's identity and
// provenance around its data. The stream sequence is not in it: JetStream
// assigns that, and a reader takes it from the message metadata.
type Envelope struct {
	Meta
	Data json.RawMessage `json:"data"`
}

// Meta is every field of the envelope but the data. Embedded, its fields sit
// at the top level of the JSON object beside "data".
type Meta struct {
	ID         string      `json:"id"`
	Type       string      `json:"type"`
	Version    int         `json:"version"`
	Aggregate  AggregateID `json:"aggregate"`
	OccurredAt time.Time   `json:"occurred_at"`
	CommandID  string      `json:"command_id"`
	// By is who asked for the event (issue 33): the operator whose
	// authenticated connection called the verb, or the actor the controller
	// names when it acted by itself (ActorController, ActorReconciler,
	// ActorRolloutPrefix+id). Empty in a node's report (the node said it)
	// and in events from before operators had names.
	By string `json:"by,omitempty"`
}

// Recorded is an event read back from the stream: its envelope, its decoded
// data, and where it sits in the stream.
type Recorded struct {
	Seq      uint64
	Subject  string
	Envelope Envelope
	Event    Event
	// Signer is the key the message names as its signer ("" for none).
	Signer string
	// Verified: Signer's signature of the message's data was checked and
	// holds. Set for a report that carries no MAC the controller can
	// check: the report of a node whose keys were born on the node (issue
	// 29), which the fold then holds to the node's recorded keys.
	Verified bool
	// Voucher is a standing's VoucherHeader: a module identity's key signed
	// by its node's own bus key.
	Voucher string
	// Foreign, when set, says why the message is not its rightful
	// writer's event (rule 19): it is set aside, never folded.
	Foreign error
	// Stored is when the stream stored the message.
	Stored time.Time
}

// EventID is the id of the i-th event of a command. It is derived, not random,
// so that a retried command encodes byte-identical messages.
func EventID(commandID string, i int) string { return commandID + "/" + strconv.Itoa(i) }

// outgoing is Envelope with the data still a Go value, so that encoding is one
// pass: a json.RawMessage field would be re-scanned and compacted, which on
// the append path costs as much as encoding the event itself.
type outgoing struct {
	Meta
	Data Event `json:"data"`
}

// Encode wraps ev for aggregate agg at the current version of its type, as
// asked for by by (Meta.By).
func Encode(agg AggregateID, commandID, by string, i int, at time.Time, ev Event) ([]byte, error) {
	typ := ev.EventType()
	ent, ok := table[typ]
	if !ok {
		return nil, fmt.Errorf("events: cannot encode %s: the type is not in the decoder table", typ)
	}
	m := Meta{
		ID: EventID(commandID, i), Type: typ, Version: ent.current,
		Aggregate: agg, OccurredAt: at.UTC(), CommandID: commandID, By: by,
	}
	if b, ok := appendEncoded(nil, m, ev); ok {
		return b, nil
	}
	b, err := json.Marshal(outgoing{Meta: m, Data: ev})
	if err != nil {
		return nil, fmt.Errorf("events: cannot encode %s: %w", typ, err)
	}
	return b, nil
}

// FoldedEnvelope is the envelope DecodeFromSubject answers for what Encode
// writes of the same aggregate, by, time and event at its type's current
// version: the fields the fold's fast path fills (type, version, time, by,
// and the aggregate its subject names), and no others. An appender that
// holds what it wrote hands the fold this rather than the fold decoding it
// again (store.Known); it must stay the fast path's answer field for field.
func FoldedEnvelope(agg AggregateID, by string, at time.Time, ev Event) Envelope {
	typ := ev.EventType()
	return Envelope{Meta: Meta{Type: typ, Version: table[typ].current, Aggregate: agg, OccurredAt: at.UTC(), By: by}}
}

// ValidateCommandID refuses a command id that could not travel as a
// Nats-Msg-Id header: 1 to 128 letters, digits, '-', '_', '.' or ':'.
func ValidateCommandID(id string) error {
	ok := id != "" && len(id) <= 128
	for i := 0; ok && i < len(id); i++ {
		c := id[i]
		ok = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' || c == ':'
	}
	if !ok {
		return fmt.Errorf("events: command id %q is not allowed: use 1 to 128 letters, digits, '-', '_', '.' or ':'", id)
	}
	return nil
}

// DecodeEnvelope reads only the envelope, for tools (mesh events) that show
// events without needing to understand them.
func DecodeEnvelope(raw []byte) (Envelope, error) {
	var env Envelope
	if err := json.Unmarshal(raw, &env); err != nil {
		return env, &DecodeError{Reason: "the message is not an event envelope: " + err.Error()}
	}
	if env.Type == "" || env.Version < 1 {
		return env, &DecodeError{Type: env.Type, Version: env.Version, Reason: "the envelope has no type or version"}
	}
	return env, nil
}

// Decode turns stored bytes into an envelope and the current Go type of its
// event, upcasting older versions. An unknown type or version is an error
// naming both: a fold that skipped it would silently diverge from the log.
func Decode(raw []byte) (Envelope, Event, error) {
	env, err := DecodeEnvelope(raw)
	if err != nil {
		return env, nil, err
	}
	ent, ok := table[env.Type]
	if !ok {
		return env, nil, &DecodeError{Type: env.Type, Version: env.Version, Reason: "unknown event type", Unknown: true}
	}
	if env.Version > ent.current {
		return env, nil, &DecodeError{Type: env.Type, Version: env.Version, Unknown: true,
			Reason: fmt.Sprintf("unknown version (this binary knows up to %d)", ent.current)}
	}
	data := env.Data
	for v := env.Version; v < ent.current; v++ {
		up, ok := ent.upcasters[v]
		if !ok {
			return env, nil, &DecodeError{Type: env.Type, Version: env.Version,
				Reason: fmt.Sprintf("no upcaster from version %d", v)}
		}
		if data, err = up(data); err != nil {
			return env, nil, &DecodeError{Type: env.Type, Version: env.Version, Reason: err.Error()}
		}
	}
	ev, err := ent.decode(data)
	if err != nil {
		return env, nil, &DecodeError{Type: env.Type, Version: env.Version, Reason: "malformed data: " + err.Error()}
	}
	return env, ev, nil
}

// DecodeFromSubject is the fold's Decode, for a message whose subject ends in
// its event type, as every mesh subject does. When the message is of its
// type's current version it decodes in one pass and answers an Envelope with
// Type, Version, OccurredAt, By and (from the subject) Aggregate, but no ID,
// CommandID or Data: a fold uses none of them, and decoding is the larger part
// of a fold's cost. Any other message takes Decode's path (upcasting, or the
// error naming type and version). A DeclarationSent read this way lacks its
// sealed bytes and signature, which no fold reads.
func DecodeFromSubject(subject string, raw []byte) (Envelope, Event, error) {
	typ := subject[strings.LastIndexByte(subject, '.')+1:]
	ent, ok := table[typ]
	if !ok {
		return Decode(raw)
	}
	env, ev, err := ent.decodeCurrent(raw)
	if err != nil || env.Type != typ || env.Version != ent.current {
		return Decode(raw)
	}
	env.Aggregate = aggregateOf(subject)
	return env, ev, nil
}

// aggregateOf reads kind and id out of mesh.ev.<kind>.<id>.<type>; other
// subjects (reports) belong to no aggregate.
func aggregateOf(subject string) AggregateID {
	rest, ok := strings.CutPrefix(subject, EventPrefix+".")
	if !ok {
		return AggregateID{}
	}
	kind, rest, _ := strings.Cut(rest, ".")
	id, _, _ := strings.Cut(rest, ".")
	return AggregateID{Kind: kind, ID: id}
}

// DecodeError says which event could not be read and why. Callers add the
// stream sequence; the remedy for an unknown type is nearly always a newer binary.
type DecodeError struct {
	Type    string
	Version int
	Reason  string
	// Unknown: a well-formed envelope of a type or version this binary
	// does not know, as a newer writer would make.
	Unknown bool
}

func (e *DecodeError) Error() string {
	if e.Type == "" {
		return "events: cannot decode event: " + e.Reason
	}
	return fmt.Sprintf("events: cannot decode event type %q version %d: %s; run a mesh binary that knows it", e.Type, e.Version, e.Reason)
}
