package fanout_test

import (
	"sync"
	"sync/atomic"
	"testing"

	"github.com/meshctl/mesh/fanout"
)

// Every index is called exactly once, and never more than the bound at once.
func TestEachCallsEveryIndexOnceWithinTheBound(t *testing.T) {
	for _, c := range []struct{ n, workers int }{{0, 4}, {1, 4}, {100, 1}, {100, 7}, {1000, 32}, {5, 0}} {
		calls := make([]atomic.Int32, c.n)
		var now, most atomic.Int32
		// Each call waits for the others that can run beside it, so a pool
		// that ran more than its bound would be seen holding more at once.
		var mu sync.Mutex
		fanout.Each(c.n, c.workers, func(i int) {
			in := now.Add(1)
			mu.Lock()
			most.Store(max(most.Load(), in))
			mu.Unlock()
			calls[i].Add(1)
			now.Add(-1)
		})
		for i := range calls {
			if got := calls[i].Load(); got != 1 {
				t.Fatalf("n=%d workers=%d: index %d called %d times", c.n, c.workers, i, got)
			}
		}
		if bound := int32(max(c.workers, 1)); most.Load() > bound {
			t.Fatalf("n=%d workers=%d: %d calls ran at once", c.n, c.workers, most.Load())
		}
	}
}

// A bound of one is the indexes in order, one after another.
func TestEachWithOneWorkerKeepsTheOrder(t *testing.T) {
	var got []int
	fanout.Each(50, 1, func(i int) { got = append(got, i) })
	for i, v := range got {
		if v != i {
			t.Fatalf("call %d was index %d", i, v)
		}
	}
	if len(got) != 50 {
		t.Fatalf("%d calls, want 50", len(got))
	}
}

func TestPerCoreCallsEveryIndexOnce(t *testing.T) {
	var sum atomic.Int64
	fanout.PerCore(1000, func(i int) { sum.Add(int64(i)) })
	if sum.Load() != 999*1000/2 {
		t.Fatalf("sum of indexes %d", sum.Load())
	}
}
