package rows

import (
	"testing"
	"time"
)

// BenchmarkDecodeNode decodes a node row whole and brief (without its
// capabilities and labels, as status and a push read every row), in the
// same run, with each one's allocations: a push reads every row brief
// (issue 34).
func BenchmarkDecodeNode(b *testing.B) {
	n := fullNode(time.Now())
	n.LastReport.Failed = nil
	n.LastSent.Digest, n.LastSent.ContentDigest, n.LastReport.Digest = hexDigest, hexDigest, hexDigest
	row := EncodeNode(n)
	for _, brief := range []bool{false, true} {
		name := map[bool]string{false: "whole", true: "brief"}[brief]
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := DecodeNodeAs(row, brief); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkEncodeNode encodes a node row whose digests are the mesh's (in
// hex, kept as their bytes), into a reused buffer as the fold does, with
// the row's size: a push writes every node's row twice.
func BenchmarkEncodeNode(b *testing.B) {
	n := fullNode(time.Now())
	n.LastReport.Failed = nil
	n.LastSent.Digest, n.LastSent.ContentDigest, n.LastReport.Digest = hexDigest, hexDigest, hexDigest
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendNode(buf[:0], n)
	}
	b.ReportMetric(float64(len(buf)), "bytes/row")
}
