package events

import (
	"testing"
	"time"
)

func BenchmarkDecodeFromSubject(b *testing.B) {
	raw, _ := Encode(NodeAggregate("node-12345"), "3f2a9c1e5b7d4a6f8e0c2b1a", "", 0, time.Now(),
		NodeEnrolled{Name: "node-12345", Capabilities: []string{"linux"}, Labels: map[string]string{"zone": "a"}})
	subject := NodeAggregate("node-12345").Subject("NodeEnrolled")
	b.SetBytes(int64(len(raw)))
	for b.Loop() {
		if _, _, err := DecodeFromSubject(subject, raw); err != nil {
			b.Fatal(err)
		}
	}
}
