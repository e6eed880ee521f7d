package rows

import (
	"encoding/binary"
	"time"
)

// Liveness is a node's last recorded liveness change (issue 28): a row
// only for nodes that were once unreachable, since only the changes are
// events. Version is the liveness aggregate's last event, which the next
// change expects.
type Liveness struct {
	Node        string        `json:"node"`
	Unreachable bool          `json:"unreachable"`
	LastHeard   time.Time     `json:"last_heard"` // when lost: the last time it was heard
	Bound       time.Duration `json:"bound"`      // when lost: the silence it outlasted
	Since       time.Time     `json:"since"`      // when the change was recorded
	Version     uint64        `json:"version"`
}

// Liveness rows are few while a fleet is well, and one a node once a rack,
// a network or the bus between is lost: status reads every one, and in
// JSON their decoding was a fifth of a second of CPU a status of 100,000
// unreachable nodes (the status 0.8-1.5 s end to end, issue 34's bound
// 300 ms; docs/performance.md, "A status of a fleet lost"). The node is
// in the key. The value is:
//
//	uvarint(version=1) | bool(unreachable) | time(last_heard) |
//	varint(bound nanoseconds) | time(since) | uvarint(version)
//
// with codec.go's bool and time.
const livenessCodec = 1

// EncodeLiveness is l's row.
func EncodeLiveness(l Liveness) []byte {
	w := rowWriter{b: binary.AppendUvarint(make([]byte, 0, 40), livenessCodec)}
	w.bool(l.Unreachable)
	w.time(l.LastHeard)
	w.int(int64(l.Bound))
	w.time(l.Since)
	w.uint(l.Version)
	return w.b
}

// DecodeLiveness reads node's row.
func DecodeLiveness(node string, b []byte) (Liveness, error) {
	r := reader{b: b}
	if v := r.uvarint(); v != livenessCodec {
		return Liveness{}, ErrCorrupt
	}
	l := Liveness{Node: node, Unreachable: r.bool(), LastHeard: r.time(), Bound: time.Duration(r.varint()), Since: r.time(), Version: r.uvarint()}
	if r.bad || len(r.b) != 0 {
		return Liveness{}, ErrCorrupt
	}
	return l, nil
}
