package projections

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/meshctl/mesh/events"
)

// Node rows are written on every enrolment, send and report, and read whole
// by status: in JSON their encoding was the largest cost of a fold's one
// goroutine and their decoding most of status. So they use the compact form
// of codec.go: fields in a fixed order, strings and lists length-prefixed,
// labels in key order (one row has one encoding), times as a presence byte
// and unix nanoseconds.
const nodeCodec = 1

func encodeNode(n Node) []byte { return appendNode(make([]byte, 0, 160), n) }

// appendNode appends n's row to dst.
func appendNode(dst []byte, n Node) []byte {
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
		w.str(s.Digest)
		w.str(s.ContentDigest)
		w.str(s.By)
		w.uint(uint64(s.Resources))
		w.time(s.At)
		w.uint(s.StreamSeq)
	}
	w.bool(n.LastReport != nil)
	if r := n.LastReport; r != nil {
		w.str(string(r.Outcome))
		w.uint(r.Sequence)
		w.str(r.Digest)
		w.str(r.Reason)
		w.failures(r.Failed)
		w.uint(r.Highest)
		w.time(r.At)
		w.uint(r.StreamSeq)
		w.time(r.FailingSince)
	}
	return w.b
}

func decodeNode(b []byte) (Node, error) { return decodeNodeAs(b, false) }

// decodeNodeAs decodes a node row; brief leaves out its capabilities and
// labels (nil), which status never reads: at 100,000 nodes making a map of
// labels a row was the largest part of decoding them.
func decodeNodeAs(b []byte, brief bool) (Node, error) {
	r := reader{b: b}
	if r.uvarint() != nodeCodec {
		return Node{}, errCorruptNode
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
		s := &Sent{Sequence: r.uvarint(), Digest: r.str(), ContentDigest: r.str(), By: r.str()}
		s.Resources = int(r.uvarint())
		s.At = r.time()
		s.StreamSeq = r.uvarint()
		n.LastSent = s
	}
	if r.bool() {
		rep := &Report{Outcome: events.Outcome(r.str()), Sequence: r.uvarint(), Digest: r.str(), Reason: r.str(), Failed: r.failures()}
		rep.Highest = r.uvarint()
		rep.At = r.time()
		rep.StreamSeq = r.uvarint()
		rep.FailingSince = r.time()
		n.LastReport = rep
	}
	if r.bad || len(r.b) != 0 {
		return Node{}, errCorruptNode
	}
	return n, nil
}

var errCorruptNode = errors.New("projections: corrupt node row")

// rowWriter appends the compact form's fields.
type rowWriter struct{ b []byte }

func (w *rowWriter) uint(v uint64) { w.b = binary.AppendUvarint(w.b, v) }
func (w *rowWriter) str(s string)  { w.b = appendStr(w.b, s) }
func (w *rowWriter) bool(v bool) {
	if v {
		w.b = append(w.b, 1)
	} else {
		w.b = append(w.b, 0)
	}
}

func (w *rowWriter) int(v int64) { w.b = binary.AppendVarint(w.b, v) }

// failures writes a report's failed resources; none reads back as nil.
func (w *rowWriter) failures(l []events.ResourceFailure) {
	w.uint(uint64(len(l)))
	for _, f := range l {
		w.str(f.Path)
		w.str(f.Reason)
	}
}

func (r *reader) failures() []events.ResourceFailure {
	k := r.count()
	if k == 0 {
		return nil
	}
	out := make([]events.ResourceFailure, k)
	for i := range out {
		out[i] = events.ResourceFailure{Path: r.str(), Reason: r.str()}
	}
	return out
}

func (w *rowWriter) strs(l []string) {
	w.uint(uint64(len(l)))
	for _, s := range l {
		w.str(s)
	}
}

func (w *rowWriter) time(t time.Time) {
	if t.IsZero() {
		w.b = append(w.b, 0)
		return
	}
	w.b = binary.AppendVarint(append(w.b, 1), t.UnixNano())
}

func (r *reader) bool() bool {
	if r.bad || len(r.b) == 0 || r.b[0] > 1 {
		r.bad = true
		return false
	}
	v := r.b[0] == 1
	r.b = r.b[1:]
	return v
}

// count reads a list length, refusing one longer than the bytes left.
func (r *reader) count() uint64 {
	n := r.uvarint()
	if n > uint64(len(r.b)) {
		r.bad = true
		return 0
	}
	return n
}

func (r *reader) strs() []string {
	n := r.count()
	out := make([]string, 0, n)
	for range n {
		out = append(out, r.str())
	}
	return out
}

func (r *reader) time() time.Time {
	if !r.bool() {
		return time.Time{}
	}
	return time.Unix(0, r.varint()).UTC()
}

// putNode encodes the row into a pooled buffer: the batch copies what it is
// given, and a row allocated per event was most of a fold's own garbage.
func putNode(b *pebble.Batch, n Node) error {
	buf := rowBuffers.Get().(*[]byte)
	*buf = appendNode((*buf)[:0], n)
	err := b.Set(nodeKey(n.Name), *buf, nil)
	rowBuffers.Put(buf)
	return err
}

var rowBuffers = sync.Pool{New: func() any { return new([]byte) }}

func getNode(rd pebble.Reader, name string) (Node, bool, error) {
	v, closer, err := rd.Get(nodeKey(name))
	if errors.Is(err, pebble.ErrNotFound) {
		return Node{}, false, nil
	}
	if err != nil {
		return Node{}, false, err
	}
	defer closer.Close()
	n, err := decodeNode(v)
	if err != nil {
		return Node{}, false, fmt.Errorf("%w: %s", err, name)
	}
	return n, true, nil
}

// nodeRows decodes every node row; brief as decodeNodeAs.
func nodeRows(rd pebble.Reader, brief bool) ([]Node, error) {
	return scanRows(rd, []byte{prefixNode}, func(_, v []byte) (Node, error) { return decodeNodeAs(v, brief) })
}
