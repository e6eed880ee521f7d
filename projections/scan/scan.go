package scan

import (
	"fmt"

	"github.com/cockroachdb/pebble/v2"
	"github.com/meshctl/mesh/fanout"
)

// Rows reads every row from lo up to hi, in key order, with decode. The
// one scan every read model's listing goes through: decoding is nearly all
// the cost of reading a large read model (status reads every node row), so
// it is spread over the cores; the iteration itself is cheap.
//
// decode runs on several goroutines at once (from ParallelRows rows): it
// must touch nothing but its own row. A decode that filled a shared map
// crashed a controller with 5,000 node addresses (concurrent map writes).
func Rows[T any](r pebble.Reader, lo, hi []byte, decode func(key, value []byte) (T, error)) ([]T, error) {
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var held arena
	for it.First(); it.Valid(); it.Next() {
		held.add(it.Key(), it.Value())
	}
	if err := it.Error(); err != nil {
		return nil, err
	}
	keys, values := held.rows()
	out := make([]T, len(values))
	errs := make([]error, len(values))
	Each(len(values), func(i int) { out[i], errs[i] = decode(keys[i], values[i]) })
	for i, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("projections: row %q is corrupt: %w", keys[i], err)
		}
	}
	return out, nil
}

// ParallelRows is the size from which a scan decodes on every core.
const ParallelRows = 512

// Each runs one for each of n rows: on every core from ParallelRows
// rows, where decoding them is worth the goroutines.
func Each(n int, one func(i int)) {
	if n < ParallelRows {
		for i := range n {
			one(i)
		}
		return
	}
	fanout.PerCore(n, one)
}

// arena holds a scan's keys and values, copied out of the iterator (whose
// slices last only until it moves), in chunks of arenaChunk bytes. A
// slice a row, each appended to a growing list of slices, was a sixth of
// reading 100,000 node rows: 200,000 allocations, and the lists' doubling
// copied pointers under the collector's write barrier (issue 34, the
// first status after a push). Each row is handed out capped (a full
// slice expression), so a caller that keeps one and appends to it copies
// rather than writing over its neighbour's bytes.
type arena struct {
	chunks [][]byte
	spans  []span
}

// span is one row in the arena: its chunk's index and where its key and
// value end. No pointer in it: the list grows by a plain copy, and the
// collector does not scan it.
type span struct{ chunk, start, keyEnd, valueEnd int }

// arenaChunk is an arena's chunk: a row larger than it has one of its own.
const arenaChunk = 256 << 10

func (a *arena) add(k, v []byte) {
	n := len(k) + len(v)
	if last := len(a.chunks) - 1; last < 0 || cap(a.chunks[last])-len(a.chunks[last]) < n {
		a.chunks = append(a.chunks, make([]byte, 0, max(arenaChunk, n)))
	}
	c := len(a.chunks) - 1
	start := len(a.chunks[c])
	a.chunks[c] = append(append(a.chunks[c], k...), v...)
	a.spans = append(a.spans, span{chunk: c, start: start, keyEnd: start + len(k), valueEnd: start + n})
}

// rows answers the arena's keys and values, in the order added.
func (a *arena) rows() (keys, values [][]byte) {
	keys, values = make([][]byte, len(a.spans)), make([][]byte, len(a.spans))
	for i, s := range a.spans {
		c := a.chunks[s.chunk]
		keys[i] = c[s.start:s.keyEnd:s.keyEnd]
		values[i] = c[s.keyEnd:s.valueEnd:s.valueEnd]
	}
	return keys, values
}
