package events

import "testing"

// Every event type the fold knows says what it moves beyond its rows, and
// the table names no type the fold does not know: a new event type cannot
// leave the composition cache or a live connection's grant stale by being
// forgotten here. Fails when a type is added to Rights and not to Moved.
func TestEveryEventSaysWhatItMoves(t *testing.T) {
	for typ := range Rights {
		if _, ok := Moved[typ]; !ok {
			t.Errorf("event type %s does not say what it moves: add it to Moved (events/moves.go)", typ)
		}
	}
	for typ := range Moved {
		if _, ok := Rights[typ]; !ok {
			t.Errorf("Moved names %s, which is no event type of Rights", typ)
		}
	}
	// Reports never move composition, except facts (capabilities), and no
	// report moves a grant: what a node says of itself grants it nothing.
	for typ, r := range Rights {
		m := Moved[typ]
		if r.Writer == ByNode && (m&MovesGrants != 0 || (m&MovesComposition != 0 && typ != "NodeFactsReported")) {
			t.Errorf("%s, a node's report, moves %b", typ, m)
		}
	}
}
