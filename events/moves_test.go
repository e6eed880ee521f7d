package events

import "testing"

// Reports never move composition, except facts (capabilities), and no
// report moves a grant: what a node says of itself grants it nothing.
// Fails when a node's report is said to move either.
func TestNoReportMovesAGrant(t *testing.T) {
	for typ, r := range Rights {
		if r.Writer == ByNode && (r.Moves&MovesGrants != 0 || (r.Moves&MovesComposition != 0 && typ != "NodeFactsReported")) {
			t.Errorf("%s, a node's report, moves %b", typ, r.Moves)
		}
	}
	if len(TypesMoving(MovesComposition)) == 0 || len(TypesMoving(MovesGrants)) == 0 {
		t.Fatal("no event moves composition or grants: the caches would never be refreshed")
	}
}
