package events

import (
	"encoding/json"
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

// BenchmarkDecodeSend decodes a send as a fold from the log does (a start's
// tail, a rebuild: no store remembers it), beside encoding/json's decoding
// of the same bytes in the same run; the figure that matters is
// plan/json, the share of encoding/json's time the plan takes. A send's
// declaration (1,200 bytes, as the bench's module seals it) and its
// window proof are most of its bytes, in base64.
func BenchmarkDecodeSend(b *testing.B) {
	decl := make([]byte, 1200)
	for i := range decl {
		decl[i] = byte(i * 7)
	}
	agg := NodeAggregate("node-12345")
	raw, err := Encode(agg, "3f2a9c1e5b7d4a6f8e0c2b1a", "", 0, time.Now(), DeclarationSent{Node: "node-12345", Sequence: 7,
		Digest: "3f2a9c1e5b7d4a6f8e0c2b1a3f2a9c1e5b7d4a6f8e0c2b1a3f2a9c1e5b7d4a6f", ContentDigest: "5b7d4a6f8e0c2b1a3f2a9c1e5b7d4a6f8e0c2b1a3f2a9c1e5b7d4a6f8e0c2b1a",
		By: "push", Resources: 1, Declaration: decl, Signature: decl[:64], Key: "ACKOTVEL6QXVUAJXBW6TDVPDTU6D65WSYJ7ELIXMMVE34A6J7RRX2GA2", Proof: decl[:320]})
	if err != nil {
		b.Fatal(err)
	}
	subject := agg.Subject(DeclarationSent{}.EventType())
	b.SetBytes(int64(len(raw)))
	var plan, general time.Duration
	for b.Loop() {
		t0 := time.Now()
		if _, ev, err := DecodeFromSubject(subject, raw); err != nil || len(ev.(DeclarationSent).Declaration) != len(decl) {
			b.Fatalf("the plan read %v: %v", ev, err)
		}
		t1 := time.Now()
		var env struct{ Data DeclarationSent }
		if err := json.Unmarshal(raw, &env); err != nil || len(env.Data.Declaration) != len(decl) {
			b.Fatalf("encoding/json read %v: %v", env, err)
		}
		plan += t1.Sub(t0)
		general += time.Since(t1)
	}
	b.ReportMetric(plan.Seconds()/general.Seconds(), "plan/json")
}
