// Package fanout is the mesh's one worker pool: a bounded fan-out of
// independent calls, fn(0..n-1), waited for together. Round trips to the bus
// (reading declarations back, opening sealed settings), decoding rows on
// every core, and a load harness opening thousands of agents all fan out
// through it, so how many run at once is said in one place.
package fanout

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// Each runs fn(0..n-1) on at most workers goroutines and returns once every
// call has returned. Each worker takes the next index as it frees, so a
// slow call holds up one worker, not a fixed share of the indexes. fn's
// calls may run in any order and at once: a caller that keeps results
// writes them to its own slot (out[i]), which keeps its order.
//
// workers below 1 counts as 1: a bound of none would be a goroutine per
// index, which is what this bound is for (a hundred thousand round trips
// at once is a flood, not a speed-up).
func Each(n, workers int, fn func(i int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(n, max(workers, 1)) {
		wg.Go(func() {
			// Add answers the index after the one taken: minus one is ours.
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				fn(i)
			}
		})
	}
	wg.Wait()
}

// PerCore is Each with a worker per core: for work the CPU bounds (decoding,
// composing, checking signatures), where more workers than cores only wait
// for each other.
func PerCore(n int, fn func(i int)) { Each(n, runtime.GOMAXPROCS(0), fn) }
