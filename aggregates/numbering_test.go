package aggregates

import (
	"strings"
	"testing"
)

// Rule 3, numbering: one above the last sent; above what a node that
// refused a replay says it applied, when the log lost its tail; never a
// highest no mesh could have sent. Each row fails when the number or the
// note changes.
func TestNumberDeclaration(t *testing.T) {
	cases := []struct {
		name          string
		last, refused uint64
		seq           uint64
		noteMentions  string
	}{
		{"the first", 0, 0, 1, ""},
		{"one above the last", 41, 0, 42, ""},
		{"a refusal below the next changes nothing", 41, 40, 42, ""},
		{"a refusal at the next numbers above it", 41, 42, 43, "above 42"},
		{"the log lost its tail", 3, 90, 91, "the highest sequence db-1 says it applied"},
		{"a highest no mesh sent is not believed", 3, MaxSequence, 4, "which no mesh has sent"},
	}
	for _, c := range cases {
		seq, note := NumberDeclaration("db-1", c.last, c.refused)
		if seq != c.seq || (c.noteMentions == "") != (note == "") || !strings.Contains(note, c.noteMentions) {
			t.Errorf("%s: %d %q, want %d and a note mentioning %q", c.name, seq, note, c.seq, c.noteMentions)
		}
	}
}
