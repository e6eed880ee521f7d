package commands

import (
	"context"
	"testing"
	"time"

	"github.com/meshctl/mesh/aggregates"
	"github.com/meshctl/mesh/events"

	"github.com/meshctl/mesh/embedded/embeddedtest"
	"github.com/meshctl/mesh/projections"
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

// The rollout's gate (aggregates.Gate) reads the runtime states the fold
// writes: were they to differ, every program would read as not running and
// a crash loop would never halt a wave.
func TestTheGateReadsTheFoldsRuntimeStates(t *testing.T) {
	if aggregates.RuntimeRunning != projections.RuntimeRunning || aggregates.RuntimeCrashLooping != projections.RuntimeCrashLooping {
		t.Fatal("aggregates and projections name the runtime states differently")
	}
}

// Time travel answers as the same controller: every field of Self (its
// bus, name, keys, secrets) is the present's in the past's handlers. Fails
// when the past's handlers are built field by field and one is missed.
func TestThePastIsTheSameController(t *testing.T) {
	srv := embeddedtest.Server(t)
	ctrl, err := StartController(context.Background(), embeddedtest.Conn(t, srv), ControllerConfig{Home: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ctrl.Close() })
	h := ctrl.Handlers
	if err := h.inThePast(context.Background(), time.Now(), func(past *Handlers) error {
		if past.Self != h.Self || !past.Past || past.Proj == h.Proj {
			t.Fatalf("the past's handlers: %+v", past.Self)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}
