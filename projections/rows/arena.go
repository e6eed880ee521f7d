package rows

import (
	"crypto/sha256"
	"unsafe"

	"github.com/meshctl/mesh/wire"
)

// NodeArena holds what decoding a run of node rows makes in three large
// pieces, their strings' bytes in one array and their sends and reports in
// one slice each, rather than an object a string and a struct: status
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
// a run is a few hundred kilobytes, large enough that its three pieces are
// few beside its rows.
const Run = 1024

// DecodeRun decodes rows (brief as DecodeNodeAs) into out and errs, which
// are at least as long, through one arena, or each row alone when alone.
func DecodeRun(rows [][]byte, brief, alone bool, out []Node, errs []error) {
	if alone {
		for i, r := range rows {
			out[i], errs[i] = decodeNode(r, brief, nil)
		}
		return
	}
	n := 0
	for _, r := range rows {
		// A row's strings are at most its bytes, but each of its three
		// digests, kept as 32 bytes, is read as 64 characters.
		n += len(r) + 3*sha256.Size
	}
	a := &NodeArena{text: make([]byte, 0, n), sents: make([]wire.Sent, 0, len(rows)), reports: make([]wire.Report, 0, len(rows))}
	for i, r := range rows {
		out[i], errs[i] = decodeNode(r, brief, a)
	}
}

// string answers b as a string kept in the arena's array. The array is
// only ever appended to within its capacity, so bytes a string points to
// are never written again; past its capacity (a row larger than the arena
// was made for) b is copied as any string is.
func (a *NodeArena) string(b []byte) string {
	if len(b) == 0 || len(a.text)+len(b) > cap(a.text) {
		return string(b)
	}
	start := len(a.text)
	a.text = append(a.text, b...)
	return unsafe.String(&a.text[start], len(b))
}

// sent answers s kept in the arena (a copy of its own when none, or full).
func (a *NodeArena) sent(s wire.Sent) *wire.Sent {
	if a == nil || len(a.sents) == cap(a.sents) {
		// A copy made here alone: s's own address taken would put every
		// s on the heap, the arena's too.
		own := s
		return &own
	}
	a.sents = append(a.sents, s)
	return &a.sents[len(a.sents)-1]
}

// report answers rep kept in the arena (a copy of its own when none, or
// full).
func (a *NodeArena) report(rep wire.Report) *wire.Report {
	if a == nil || len(a.reports) == cap(a.reports) {
		own := rep
		return &own
	}
	a.reports = append(a.reports, rep)
	return &a.reports[len(a.reports)-1]
}
