package events

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// FuzzFastPath: whatever the bytes, when the fold's fast path reads an event
// the general decoder reads the same event from them. (go test runs the
// seeds; go test -fuzz FuzzFastPath ./events/ searches further.)
func FuzzFastPath(f *testing.F) {
	at := time.Date(2026, 12, 2, 14, 0, 0, 1, time.UTC)
	for _, ev := range []Event{NodeEnrolled{Name: "a", Labels: map[string]string{"k": "}\"{"}}, NodeRetired{Name: "b", RetiredAt: at}} {
		raw, _ := Encode(NodeAggregate("a"), "c", "", 0, at, ev)
		f.Add(raw)
	}
	f.Add([]byte(`{"id":"x","type":"NodeRetired","version":1,"aggregate":{"kind":"node","id":"n"},"occurred_at":"2026-12-02T14:00:00Z","command_id":"c","data":{"name":"n"},"x":1}`))
	// A leading zero in the version: strconv reads it, JSON does not.
	f.Add([]byte(`{"id":"x","type":"NodeEnrolled","version":01,"aggregate":{"kind":"node","id":"n"},"occurred_at":"2026-12-02T14:00:00Z","command_id":"c","data":{"name":"n","capabilities":null,"labels":null}}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		envFast, evFast, errFast := table["NodeEnrolled"].decodeCurrent(raw)
		if errFast != nil {
			return
		}
		envSlow, evSlow, errSlow := Decode(raw)
		if errSlow != nil {
			if envFast.Type == "NodeEnrolled" && envFast.Version == 1 {
				t.Fatalf("the fast path read %q, which the general decoder refuses: %v", raw, errSlow)
			}
			return
		}
		if envSlow.Type == "NodeEnrolled" && envSlow.Version == 1 && (!cmp.Equal(evFast, evSlow) || !envFast.OccurredAt.Equal(envSlow.OccurredAt)) {
			t.Fatalf("%q: fast %+v, general %+v", raw, evFast, evSlow)
		}
	})
}
