package events

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"
)

// BenchmarkEncodeSend writes a push's append, a DeclarationSent of a
// 1,200-byte declaration in its envelope, by Encode (the plan) and by
// encoding/json as Encode did before it, in the same run. ns/op, B/op and
// allocs/op are the plan's alone (Marshal runs with the timer stopped,
// which stops counting allocations too); plan/marshal is the ratio of
// their times, marshal-allocs/op Marshal's allocations.
func BenchmarkEncodeSend(b *testing.B) {
	ev := DeclarationSent{Node: "bench-00042", Sequence: 17, Digest: "sha256:" + string(bytes.Repeat([]byte("ab"), 32)),
		ContentDigest: "sha256:" + string(bytes.Repeat([]byte("cd"), 32)), By: "push", Resources: 1,
		Declaration: bytes.Repeat([]byte(`{"k":"v"}`), 1200/9), Signature: bytes.Repeat([]byte{7}, 64), Key: "UBCDEFGHIJKLMNOPQRSTUVWXYZ234567ABCDEFGHIJKLMNOPQRSTUV"}
	at := time.Date(2026, 12, 5, 6, 7, 8, 9, time.UTC)
	agg := NodeAggregate(ev.Node)
	marshal := func(i int) ([]byte, error) {
		return json.Marshal(outgoing{Meta: Meta{ID: EventID("cmd-1.bench-00042.0", i), Type: "DeclarationSent", Version: 1,
			Aggregate: agg, OccurredAt: at, CommandID: "cmd-1.bench-00042.0", By: "alice"}, Data: ev})
	}
	if got, _ := Encode(agg, "cmd-1.bench-00042.0", "alice", 3, at, ev); !bytes.Equal(got, must(marshal(3))) {
		b.Fatal("the plan and Marshal wrote different bytes")
	}
	// Interleaved in rounds, so the machine's noise falls on both alike.
	var plan, json time.Duration
	const round = 200
	b.ReportAllocs()
	for done := 0; done < b.N; done += round {
		n := min(round, b.N-done)
		t0 := time.Now()
		for i := range n {
			if _, err := Encode(agg, "cmd-1.bench-00042.0", "alice", i, at, ev); err != nil {
				b.Fatal(err)
			}
		}
		t1 := time.Now()
		b.StopTimer()
		t2 := time.Now()
		for i := range n {
			if _, err := marshal(i); err != nil {
				b.Fatal(err)
			}
		}
		t3 := time.Now()
		b.StartTimer()
		plan, json = plan+t1.Sub(t0), json+t3.Sub(t2)
	}
	b.ReportMetric(float64(plan.Nanoseconds())/float64(b.N), "plan-ns/op")
	b.ReportMetric(float64(json.Nanoseconds())/float64(b.N), "marshal-ns/op")
	b.ReportMetric(plan.Seconds()/json.Seconds(), "plan/marshal")
	b.ReportMetric(testing.AllocsPerRun(100, func() { _, _ = marshal(1) }), "marshal-allocs/op")
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}
