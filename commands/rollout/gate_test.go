package rollout

import (
	"testing"

	"github.com/meshctl/mesh/aggregates"
	"github.com/meshctl/mesh/projections"
)

// The rollout's gate (aggregates.Gate) reads the runtime states the fold
// writes: were they to differ, every program would read as not running and
// a crash loop would never halt a wave.
func TestTheGateReadsTheFoldsRuntimeStates(t *testing.T) {
	if aggregates.RuntimeRunning != projections.RuntimeRunning || aggregates.RuntimeCrashLooping != projections.RuntimeCrashLooping {
		t.Fatal("aggregates and projections name the runtime states differently")
	}
}
