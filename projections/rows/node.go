package rows

import (
	"encoding/binary"
	"slices"
	"time"

	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/wire"
)

// Node is the nodes read model's row: what the mesh knows of one machine.
type Node struct {
	Name         string            `json:"name"`
	Capabilities []string          `json:"capabilities"`
	Labels       map[string]string `json:"labels"`
	Retired      bool              `json:"retired"`
	EnrolledAt   time.Time         `json:"enrolled_at"`
	RetiredAt    time.Time         `json:"retired_at,omitzero"`
	// EnrolledSeq is the stream sequence of the enrolment; Version that of the
	// node aggregate's last event folded.
	EnrolledSeq uint64 `json:"enrolled_seq"`
	Version     uint64 `json:"version"`
	// LastSent is the last declaration sent to the node; LastReport the last
	// report it sent back. Nil until there is one.
	LastSent   *wire.Sent   `json:"last_sent,omitempty"`
	LastReport *wire.Report `json:"last_report,omitempty"`
}

// Node rows are written on every enrolment, send and report, and read whole
// by status: in JSON their encoding was the largest cost of a fold's one
// goroutine and their decoding most of status. So they use the compact form
// of codec.go: fields in a fixed order, strings and lists length-prefixed,
// labels in key order (one row has one encoding), times as a presence byte
// and unix nanoseconds.
//
// Version 2 keeps the three digests (the send's, its content's, the
// report's) as codec.go's digest, 32 bytes each where version 1 kept 64
// characters of hex: they were most of a row, and a push writes each
// node's row twice (its send and its report fold in different commits),
// so Pebble's memtable inserts, flushes and compactions, a fifth of the
// controller's CPU a pushed node, took 96 bytes a row more than they
// needed (issue 34 point 1, docs/performance.md "The controller's CPU").
// Version 1 rows are never read: the schema changed with it (keys.go).
const nodeCodec = 2

// EncodeNode is n's row.
func EncodeNode(n Node) []byte { return AppendNode(make([]byte, 0, 160), n) }

// AppendNode appends n's row to dst: the fold encodes into a pooled buffer,
// since a row allocated per event was most of its own garbage.
func AppendNode(dst []byte, n Node) []byte {
	w := rowWriter{b: binary.AppendUvarint(dst, nodeCodec)}
	w.str(n.Name)
	w.strs(n.Capabilities)
	keys := make([]string, 0, len(n.Labels))
	for k := range n.Labels {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	w.uint(uint64(len(keys)))
	for _, k := range keys {
		w.str(k)
		w.str(n.Labels[k])
	}
	w.bool(n.Retired)
	w.time(n.EnrolledAt)
	w.time(n.RetiredAt)
	w.uint(n.EnrolledSeq)
	w.uint(n.Version)
	w.bool(n.LastSent != nil)
	if s := n.LastSent; s != nil {
		w.uint(s.Sequence)
		w.digest(s.Digest)
		w.digest(s.ContentDigest)
		w.str(s.By)
		w.str(s.Operator)
		w.uint(uint64(s.Resources))
		w.time(s.At)
		w.uint(s.StreamSeq)
	}
	w.bool(n.LastReport != nil)
	if r := n.LastReport; r != nil {
		w.str(string(r.Outcome))
		w.uint(r.Sequence)
		w.digest(r.Digest)
		w.str(r.Reason)
		w.failures(r.Failed)
		w.uint(r.Highest)
		w.time(r.At)
		w.uint(r.StreamSeq)
		w.time(r.FailingSince)
	}
	return w.b
}

// DecodeNode reads a node row.
func DecodeNode(b []byte) (Node, error) { return DecodeNodeAs(b, false) }

// DecodeNodeAs decodes a node row; brief leaves out its capabilities and
// labels (nil), which status never reads: at 100,000 nodes making a map of
// labels a row was the largest part of decoding them.
func DecodeNodeAs(b []byte, brief bool) (Node, error) { return decodeNode(b, brief, nil) }

func decodeNode(b []byte, brief bool, a *NodeArena) (Node, error) {
	r := reader{b: b, arena: a}
	var sents *[]wire.Sent
	var reports *[]wire.Report
	if a != nil {
		sents, reports = &a.sents, &a.reports
	}
	if r.uvarint() != nodeCodec {
		return Node{}, ErrCorrupt
	}
	var n Node
	n.Name = r.str()
	if brief {
		for range r.count() {
			r.skip()
		}
		for range 2 * r.count() {
			r.skip()
		}
	} else {
		n.Capabilities = r.strs()
		if k := r.count(); k > 0 || !r.bad {
			n.Labels = make(map[string]string, k)
			for range k {
				key := r.str()
				n.Labels[key] = r.str()
			}
		}
	}
	n.Retired = r.bool()
	n.EnrolledAt = r.time()
	n.RetiredAt = r.time()
	n.EnrolledSeq = r.uvarint()
	n.Version = r.uvarint()
	if r.bool() {
		s := wire.Sent{Sequence: r.uvarint(), Digest: r.digest(), ContentDigest: r.digest(), By: r.str(), Operator: r.str()}
		s.Resources = int(r.uvarint())
		s.At = r.time()
		s.StreamSeq = r.uvarint()
		n.LastSent = kept(sents, s)
	}
	if r.bool() {
		rep := wire.Report{Outcome: events.Outcome(r.str()), Sequence: r.uvarint(), Digest: r.digest(), Reason: r.str(), Failed: r.failures()}
		rep.Highest = r.uvarint()
		rep.At = r.time()
		rep.StreamSeq = r.uvarint()
		rep.FailingSince = r.time()
		n.LastReport = kept(reports, rep)
	}
	if r.bad || len(r.b) != 0 {
		return Node{}, ErrCorrupt
	}
	return n, nil
}
