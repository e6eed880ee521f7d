package rows

import (
	"encoding/binary"
	"slices"
	"time"

	"github.com/meshctl/mesh/events"
)

// AssignmentRow is one module on one node.
type AssignmentRow struct {
	Node       string            `json:"node"`
	Module     string            `json:"module"`
	Build      string            `json:"build"`
	Settings   map[string]string `json:"settings"`
	AssignedAt time.Time         `json:"assigned_at"`
	Seq        uint64            `json:"seq"`
	// Policy as recorded ("" before policies: manual; see Policy.Or).
	Policy events.Policy `json:"policy,omitempty"`
}

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

// EncodeAssignment is a's row.
func EncodeAssignment(a AssignmentRow) []byte {
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

// DecodeAssignment reads the row of module on node.
func DecodeAssignment(node, module string, b []byte) (AssignmentRow, error) {
	r := reader{b: b}
	if v := r.uvarint(); v != assignmentCodec {
		return AssignmentRow{}, ErrCorrupt
	}
	a := AssignmentRow{Node: node, Module: module, Build: r.str()}
	n := r.uvarint()
	if n > uint64(len(b)) {
		return AssignmentRow{}, ErrCorrupt
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
		return AssignmentRow{}, ErrCorrupt
	}
	return a, nil
}
