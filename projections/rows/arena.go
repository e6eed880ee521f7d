package rows

import (
	"unsafe"

	"github.com/meshctl/mesh/wire"
)

// NodeArena holds what decoding a run of node rows makes in a few large
// pieces, their strings' bytes in arrays of textChunk and their sends and
// reports in one slice each, rather than an object a string and a struct: status
// decodes every node row for each answer, and at 100,000 nodes nine
// objects a row, and the collector they woke, were most of the first
// status's CPU after a push (issue 34 point 3). What is decoded into an
// arena keeps the whole arena alive: it is for an answer written and let
// go, not for rows kept.
type NodeArena struct {
	text    []byte
	sents   []wire.Sent
	reports []wire.Report
	// filled are the arrays text filled before its current one, and
	// spare those a later run (EachRun, arenas in turn) writes again: a run's
	// strings take several arrays (digests in hex), and only the last
	// kept was most of what a status allocated.
	filled, spare [][]byte
	reuse         bool // keep filled for a next run
}

// Run is how many rows EachRun decodes into one arena: small enough that
// a run is a few hundred kilobytes, large enough that its pieces are few
// beside its rows.
const Run = 1024

// textChunk is the size of each array an arena keeps strings in: a run's
// strings take a few of them, and the last is wasted in part only.
// Reserving a run's most (each row's bytes and each digest's 32 more)
// held some 40% more than its strings took.
const textChunk = 64 << 10

// EachRun decodes rows (brief as DecodeNodeAs) a run at a time and hands
// each to fn in order, with its index and its decoding's error. With keep
// each run has an arena of its own, which what fn keeps of a row keeps
// alive. Without, two arenas serve the runs in turn, and what fn is handed
// lives only until it returns: its strings, its send and its report are a
// later run's after that, so fn copies what it keeps. That is for an
// answer that reads every row and keeps little of each: brief status at
// 100,000 nodes decoded 67 MB into a slice of nodes and an arena a run
// (BenchmarkStatusFirst), which woke the collector within the status more
// often than not (issue 34's 300 ms bound).
//
// Past one run, the next run is decoded on another goroutine while fn is
// handed this one: decoding is some half of what status does with a row,
// and done in line it left the second core idle through the first status
// at 100,000 nodes. fn is still called on one goroutine, in order.
func EachRun(rows [][]byte, brief, keep bool, fn func(i int, n Node, err error) error) error {
	if len(rows) <= Run {
		var r decodedRun
		r.decode(rows, 0, brief, keep)
		return r.hand(fn)
	}
	// Two runs in turn: free holds those fn is done with, ready those
	// decoded; each holds both at most, so no send on them ever waits.
	free, ready, stop := make(chan *decodedRun, 2), make(chan *decodedRun, 2), make(chan struct{})
	free <- &decodedRun{}
	free <- &decodedRun{}
	// Closed however this returns, an error or a panic of fn's included:
	// the decoder then stops at its next run (what it still sends finds
	// room in ready), rather than wait on free for good, holding rows and
	// two runs (the status page asks every second, behind net/http's
	// recover).
	defer close(stop)
	// A panic while decoding is the caller's, as it was when decoding ran
	// on the caller's goroutine: carried over and raised again here, not
	// left to end the process on a goroutine nobody recovers.
	var decodePanic any
	go func() {
		defer close(ready)
		defer func() { decodePanic = recover() }()
		for lo := 0; lo < len(rows); lo += Run {
			var r *decodedRun
			select {
			case r = <-free:
			case <-stop:
				return
			}
			r.decode(rows, lo, brief, keep)
			ready <- r
		}
	}()
	for r := range ready {
		if err := r.hand(fn); err != nil {
			return err
		}
		free <- r
	}
	if decodePanic != nil { // read after ready closed: the decoder is done
		panic(decodePanic)
	}
	return nil
}

// decodedRun is one run of rows decoded, into its arena: what EachRun
// hands fn, and then decodes a later run into again.
type decodedRun struct {
	lo    int // the index of its first row
	nodes []Node
	errs  []error
	a     *NodeArena
}

// decode decodes the run of rows from lo, into an arena of its own with
// keep, else into the one it decoded its last run into, written again.
func (r *decodedRun) decode(rows [][]byte, lo int, brief, keep bool) {
	run := rows[lo:min(lo+Run, len(rows))]
	if r.a == nil || keep {
		r.a = &NodeArena{sents: make([]wire.Sent, 0, len(run)), reports: make([]wire.Report, 0, len(run)), reuse: !keep}
	} else {
		// The current array, the sends and the reports are written
		// again from their start; what fn was handed of them is gone.
		a := r.a
		if a.spare = append(a.spare, a.filled...); a.text != nil {
			a.spare = append(a.spare, a.text)
		}
		a.text, a.filled, a.sents, a.reports = nil, a.filled[:0], a.sents[:0], a.reports[:0]
	}
	if cap(r.nodes) < len(run) {
		r.nodes, r.errs = make([]Node, 0, len(run)), make([]error, 0, len(run))
	}
	r.lo, r.nodes, r.errs = lo, r.nodes[:0], r.errs[:0]
	for _, row := range run {
		n, err := decodeNode(row, brief, r.a)
		r.nodes, r.errs = append(r.nodes, n), append(r.errs, err)
	}
}

// hand calls fn with each of the run's rows in order, until fn answers an
// error.
func (r *decodedRun) hand(fn func(i int, n Node, err error) error) error {
	for i := range r.nodes {
		if err := fn(r.lo+i, r.nodes[i], r.errs[i]); err != nil {
			return err
		}
	}
	return nil
}

// string answers b as a string kept in the arena (room).
func (a *NodeArena) string(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	dst := a.room(len(b))
	copy(dst, b)
	return unsafe.String(&dst[0], len(dst))
}

// room answers n bytes (n > 0) at the end of the arena's current array,
// begun afresh when n does not fit in what is left of it, for the caller
// to fill and then make a string of (string, reader.digest). An array is
// only ever extended within its capacity, so bytes a string points to
// are never written again, until EachRun uses the arena for a later run.
func (a *NodeArena) room(n int) []byte {
	if len(a.text)+n > cap(a.text) {
		if a.text != nil && a.reuse {
			a.filled = append(a.filled, a.text)
		}
		a.text = nil
		if k := len(a.spare) - 1; k >= 0 && cap(a.spare[k]) >= n {
			a.text, a.spare = a.spare[k][:0], a.spare[:k]
		} else {
			a.text = make([]byte, 0, max(textChunk, n))
		}
	}
	start := len(a.text)
	a.text = a.text[:start+n]
	return a.text[start : start+n : start+n]
}

// kept answers v kept in list, one of an arena's slices (nil: no arena),
// or in a copy of its own when there is none or it is full. The copy is
// made here alone: v's own address taken would put every v on the heap,
// the arena's too.
func kept[T any](list *[]T, v T) *T {
	if list == nil || len(*list) == cap(*list) {
		own := v
		return &own
	}
	*list = append(*list, v)
	return &(*list)[len(*list)-1]
}
