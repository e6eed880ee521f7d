package events

import (
	"encoding/json"
	"time"
)

// The decoder table: event type to its current version, a decoder for that
// version, and an upcaster from each older version to the next. One literal,
// not init() registration, so the whole vocabulary is readable in one place.
//
// Version history (append only, never renumber; a version once written to a
// stream is read for ever):
//
//	2026-12-02  NodeEnrolled v1, NodeRetired v1.
var table = map[string]entry{
	"NodeEnrolled": {current: 1, decode: decodeAs[NodeEnrolled], decodeCurrent: decodeCurrent[NodeEnrolled]},
	"NodeRetired":  {current: 1, decode: decodeAs[NodeRetired], decodeCurrent: decodeCurrent[NodeRetired]},
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

// Known reports whether typ is in the decoder table, and its current version.
func Known(typ string) (int, bool) {
	e, ok := table[typ]
	return e.current, ok
}

// typedEnvelope is an Envelope whose data is already the Go type.
type typedEnvelope[T Event] struct {
	ID         string      `json:"id"`
	Type       string      `json:"type"`
	Version    int         `json:"version"`
	Aggregate  AggregateID `json:"aggregate"`
	OccurredAt time.Time   `json:"occurred_at"`
	CommandID  string      `json:"command_id"`
	Data       T           `json:"data"`
}

func decodeCurrent[T Event](raw []byte) (Envelope, Event, error) {
	var te typedEnvelope[T]
	if err := json.Unmarshal(raw, &te); err != nil {
		return Envelope{}, nil, err
	}
	env := Envelope{ID: te.ID, Type: te.Type, Version: te.Version, Aggregate: te.Aggregate,
		OccurredAt: te.OccurredAt, CommandID: te.CommandID}
	return env, te.Data, nil
}
