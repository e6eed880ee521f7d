package access

import (
	"testing"

	"github.com/meshctl/mesh/events"
)

// Every event type that moves grants (events.MovesGrants) names whom it
// cuts, and nothing else does: a grant-moving type left out here would leave
// a connection holding what the log took away. Fails when the two differ.
func TestEveryGrantEventCuts(t *testing.T) {
	moving := events.TypesMoving(events.MovesGrants)
	if len(moving) != len(grantUsers) || len(grantEvents) != len(moving) {
		t.Fatalf("%d types move grants, %d name whom they cut, %d subjects are followed", len(moving), len(grantUsers), len(grantEvents))
	}
	for _, typ := range moving {
		if _, ok := grantUsers[typ]; !ok {
			t.Errorf("%s moves grants and cuts nobody: add it to grantUsers", typ)
		}
	}
}
