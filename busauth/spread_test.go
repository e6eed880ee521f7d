package busauth

import (
	"testing"
	"time"
)

// A connection's permissions last the last quarter of the lifetime at
// random: never longer than it (a cut that failed is bounded by it), and
// not all the same, so a fleet that connected together is not closed
// together (spread).
func TestLifetimesAreSpreadOverTheirLastQuarter(t *testing.T) {
	seen := map[time.Duration]bool{}
	for range 1000 {
		d := spread(DefaultLifetime)
		if d > DefaultLifetime || d < DefaultLifetime*3/4 {
			t.Fatalf("a lifetime of %s out of [%s, %s]", d, DefaultLifetime*3/4, DefaultLifetime)
		}
		seen[d.Truncate(time.Second)] = true
	}
	if len(seen) < 100 {
		t.Fatalf("1,000 lifetimes fell on %d distinct seconds: not spread", len(seen))
	}
	if got := spread(2 * time.Second); got != 2*time.Second {
		t.Fatalf("a test's lifetime of 2s became %s: the bus counts whole seconds", got)
	}
}
