package moved

import (
	"maps"
	"slices"
	"testing"
)

// The log says which nodes moved only for a span it holds whole: not
// before where it began, nor past its last commit, nor once a move of no
// one node's is in it, nor before what it forgot.
func TestBetweenSaysOnlyWhatItHoldsWhole(t *testing.T) {
	l := New(10, 10)
	l.Add([]Move{{Seq: 12, Node: "a"}, {Seq: 14, Node: "b"}}, 15)
	l.Add([]Move{{Seq: 17}}, 18)
	l.Add([]Move{{Seq: 20, Node: "c"}}, 21)
	for _, c := range []struct {
		from, to uint64
		want     []string // nil: cannot say
	}{
		{10, 15, []string{"a", "b"}},
		{12, 14, []string{"b"}},
		{9, 15, nil},  // before the log began
		{10, 22, nil}, // past its last commit
		{14, 18, nil}, // the move of no one node's
		{18, 21, []string{"c"}},
		{18, 19, nil}, // nothing moved between two versions that differ
	} {
		got, ok := l.Between(c.from, c.to)
		if ok != (c.want != nil) || !slices.Equal(slices.Sorted(maps.Keys(got)), c.want) {
			t.Errorf("between %d and %d: %v %v, want %v", c.from, c.to, got, ok, c.want)
		}
	}
	// Past Max moves the oldest are forgotten, and so is the span they held.
	many := make([]Move, Max)
	for i := range many {
		many[i] = Move{Seq: uint64(100 + i), Node: "n"}
	}
	l.Add(many, 100+Max)
	if _, ok := l.Between(18, 100+Max); ok {
		t.Error("a span whose first moves were forgotten was said")
	}
	if got, ok := l.Between(100, 100+Max); !ok || !got["n"] {
		t.Errorf("the span it still holds: %v %v", got, ok)
	}

	// A fold that starts at 30 on read models whose last move of
	// composition was 25 knows nothing moved in (25, 30]: a world
	// composed at 25 is patched by the moves after.
	l = New(25, 30)
	l.Add([]Move{{Seq: 33, Node: "d"}}, 34)
	if got, ok := l.Between(25, 33); !ok || !slices.Equal(slices.Sorted(maps.Keys(got)), []string{"d"}) {
		t.Errorf("from the composition version the fold started after: %v %v", got, ok)
	}
	if _, ok := l.Between(24, 33); ok {
		t.Error("a span from before the last move the fold started after was said")
	}
	// Past the checkpoint: nothing before the fold (after a rebuild).
	l = New(31, 30)
	l.Add([]Move{{Seq: 33, Node: "d"}}, 34)
	if _, ok := l.Between(30, 33); ok {
		t.Error("a span from before a fold that knows nothing before it was said")
	}
	if got, ok := l.Between(31, 34); !ok || !got["d"] {
		t.Errorf("a span after its start: %v %v", got, ok)
	}
}
