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
}

// Run is how many rows DecodeRun decodes into one arena: small enough that
// a run is a few hundred kilobytes, large enough that its pieces are few
// beside its rows.
const Run = 1024

// textChunk is the size of each array an arena keeps strings in: a run's
// strings take a few of them, and the last is wasted in part only.
// Reserving a run's most (each row's bytes and each digest's 32 more)
// held some 40% more than its strings took.
const textChunk = 64 << 10

// DecodeRun decodes rows (brief as DecodeNodeAs) into out and errs, which
// are at least as long, through one arena, or each row alone when alone.
func DecodeRun(rows [][]byte, brief, alone bool, out []Node, errs []error) {
	if alone {
		for i, r := range rows {
			out[i], errs[i] = decodeNode(r, brief, nil)
		}
		return
	}
	a := &NodeArena{sents: make([]wire.Sent, 0, len(rows)), reports: make([]wire.Report, 0, len(rows))}
	for i, r := range rows {
		out[i], errs[i] = decodeNode(r, brief, a)
	}
}

// string answers b as a string kept in the arena's current array, begun
// afresh when b does not fit in what is left of it. An array is only ever
// appended to within its capacity, so bytes a string points to are never
// written again.
func (a *NodeArena) string(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	if len(a.text)+len(b) > cap(a.text) {
		a.text = make([]byte, 0, max(textChunk, len(b)))
	}
	start := len(a.text)
	a.text = append(a.text, b...)
	return unsafe.String(&a.text[start], len(b))
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
