package agent

import "testing"

// The thresholds of a check, probe by probe: a change is said once, when
// its run reaches its threshold; a failure in the start period does not
// count but ends a run of successes.
func TestHealthCountSaysEachChangeOnce(t *testing.T) {
	const ok, grace = 'o', 'g' // any other probe fails
	for _, c := range []struct {
		name                string
		failures, successes int
		probes              string
		said                string // per probe: . nothing, H healthy, U unhealthy
	}{
		{"one success is healthy, once", 3, 1, "ooo", "H.."},
		{"failures in a row, then said once", 3, 1, "ffff", "..U."},
		{"a success breaks a run of failures", 3, 1, "ffoff", "..H.."},
		{"two successes in a row", 1, 2, "ofoo", ".U.H"},
		{"the start period neither counts nor says", 1, 2, "gggo", "...."},
		{"a grace failure ends a run of successes", 1, 2, "ogoo", "...H"},
		{"healthy, unhealthy, healthy", 2, 1, "offffo", "H.U..H"},
	} {
		h := healthCount{failures: c.failures, successes: c.successes}
		got := ""
		for _, p := range c.probes {
			v, changed := h.observe(p == ok, p == grace)
			switch {
			case !changed:
				got += "."
			case v == saidHealthy:
				got += "H"
			case v == saidUnhealthy:
				got += "U"
			}
		}
		if got != c.said {
			t.Errorf("%s: probes %s said %s, want %s", c.name, c.probes, got, c.said)
		}
	}
}
