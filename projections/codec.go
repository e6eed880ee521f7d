package projections

import (
	"encoding/binary"
	"errors"
	"slices"
	"time"

	"github.com/meshctl/mesh/events"
)

// Assignment rows are the read model a composition reads most (five or more
// per node, all of them on every push), so they are stored in a compact binary
// form rather than JSON: decoding them was over half of composing a mesh.
// Node and module are in the key. The value is:
//
//	uvarint(version=2) | str(build) | uvarint(n) | n × (str(key) str(value)) |
//	varint(assigned_at unix nanoseconds) | uvarint(seq) | str(policy)
//
// where str is a uvarint length followed by the bytes. Settings are written
// in key order, so one assignment has one encoding.
const assignmentCodec = 2

var errCorruptRow = errors.New("projections: corrupt assignment or history row")

func encodeAssignment(a AssignmentRow) []byte {
	b := binary.AppendUvarint(nil, assignmentCodec)
	b = appendStr(b, a.Build)
	b = binary.AppendUvarint(b, uint64(len(a.Settings)))
	keys := make([]string, 0, len(a.Settings))
	for k := range a.Settings {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		b = appendStr(appendStr(b, k), a.Settings[k])
	}
	b = binary.AppendVarint(b, a.AssignedAt.UnixNano())
	b = binary.AppendUvarint(b, a.Seq)
	return appendStr(b, string(a.Policy))
}

func decodeAssignment(node, module string, b []byte) (AssignmentRow, error) {
	r := reader{b: b}
	if v := r.uvarint(); v != assignmentCodec {
		return AssignmentRow{}, errCorruptRow
	}
	a := AssignmentRow{Node: node, Module: module, Build: r.str()}
	n := r.uvarint()
	if n > uint64(len(b)) {
		return AssignmentRow{}, errCorruptRow
	}
	a.Settings = make(map[string]string, n)
	for range n {
		k := r.str()
		a.Settings[k] = r.str()
	}
	a.AssignedAt = time.Unix(0, r.varint()).UTC()
	a.Seq = r.uvarint()
	a.Policy = events.Policy(r.str())
	if r.bad || len(r.b) != 0 {
		return AssignmentRow{}, errCorruptRow
	}
	return a, nil
}

func appendStr(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

// reader consumes a row; any malformed field sets bad and yields zeros.
type reader struct {
	b   []byte
	bad bool
}

func (r *reader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.bad = true
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) varint() int64 {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.bad = true
		return 0
	}
	r.b = r.b[n:]
	return v
}

// skip passes over a string without making it.
func (r *reader) skip() {
	n := r.uvarint()
	if r.bad || n > uint64(len(r.b)) {
		r.bad = true
		return
	}
	r.b = r.b[n:]
}

func (r *reader) str() string {
	n := r.uvarint()
	if r.bad || n > uint64(len(r.b)) {
		r.bad = true
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}
