package rollout

import (
	"testing"

	"github.com/meshctl/mesh/aggregates"
	"github.com/meshctl/mesh/projections"
	"github.com/meshctl/mesh/wire"
)

// The rollout's gate (aggregates.Gate) reads the runtime states and the
// health the fold writes: were they to differ, every program would read as not running and
// a crash loop would never halt a wave.
func TestTheGateReadsTheFoldsRuntimeStates(t *testing.T) {
	if aggregates.RuntimeRunning != projections.RuntimeRunning || aggregates.RuntimeCrashLooping != projections.RuntimeCrashLooping {
		t.Fatal("aggregates and projections name the runtime states differently")
	}
	// Were these to differ, no program would ever read as healthy, and an
	// unhealthy one would never halt a wave.
	if aggregates.HealthHealthy != string(wire.HealthHealthy) || aggregates.HealthUnhealthy != string(wire.HealthUnhealthy) {
		t.Fatal("aggregates and wire name a program's health differently")
	}
}
