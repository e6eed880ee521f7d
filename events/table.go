package events

import "encoding/json"

// The decoder table: event type to its current version, a decoder for that
// version, and an upcaster from each older version to the next. One literal,
// not init() registration, so the whole vocabulary is readable in one place.
//
// Version history (append only, never renumber; a version once written to a
// stream is read for ever):
//
//	2026-12-02  NodeEnrolled v1, NodeRetired v1.
var table = map[string]entry{
	"NodeEnrolled": {current: 1, decode: decodeAs[NodeEnrolled]},
	"NodeRetired":  {current: 1, decode: decodeAs[NodeRetired]},
}

type entry struct {
	current int
	decode  func(json.RawMessage) (Event, error)
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
