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
