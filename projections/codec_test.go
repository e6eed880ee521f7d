package projections

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestAssignmentCodecRoundTrips(t *testing.T) {
	for _, a := range []AssignmentRow{
		{Node: "n", Module: "m", Build: "b", Settings: map[string]string{}, AssignedAt: time.Unix(0, 0).UTC()},
		{Node: "web-1", Module: "app", Build: "d685561", Settings: map[string]string{"workers": "8", "": "", "k": "v\x00w"},
			AssignedAt: time.Date(2026, 12, 2, 16, 0, 0, 123456789, time.UTC), Seq: 1 << 40},
	} {
		b := encodeAssignment(a)
		got, err := decodeAssignment(a.Node, a.Module, b)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(a, got); diff != "" {
			t.Fatalf("(-want +got):\n%s", diff)
		}
		// Every truncation is refused, never half-read.
		for i := range b {
			if _, err := decodeAssignment(a.Node, a.Module, b[:i]); !errors.Is(err, errCorruptRow) {
				t.Fatalf("truncated to %d bytes: err = %v", i, err)
			}
		}
	}
}
