package declaration

import (
	"testing"
	"time"
)

// A beat holds only on its own subject, under its node's key, as said.
func TestABeatIsItsNodesOnItsSubject(t *testing.T) {
	key, other := []byte("key of web-1"), []byte("key of web-2")
	at := time.Unix(0, 1_765_000_000_123_456_789)
	b := Beat(key, "mesh.live.web-1", at)
	var c MACChecker
	if got, ok := c.CheckBeat(key, "mesh.live.web-1", b); !ok || !got.Equal(at) {
		t.Fatalf("its own beat: %v %v", got, ok)
	}
	tampered := append([]byte("2"), b[1:]...)
	for name, tc := range map[string]struct {
		key     []byte
		subject string
		data    []byte
	}{
		"another node's key": {other, "mesh.live.web-1", b},
		"moved to a subject": {key, "mesh.live.web-2", b},
		"its time changed":   {key, "mesh.live.web-1", tampered},
		"no MAC":             {key, "mesh.live.web-1", []byte("1765000000123456789")},
		"a JetStream answer": {key, "mesh.live.web-1", []byte(`{"type":"io.nats.jetstream.api.v1.stream_msg_get_response"}`)},
		"nothing":            {key, "mesh.live.web-1", nil},
	} {
		if _, ok := c.CheckBeat(tc.key, tc.subject, tc.data); ok {
			t.Errorf("%s: held", name)
		}
	}
}
