package rows

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"time"
	"unsafe"

	"github.com/meshctl/mesh/events"
)

// The compact form every row here is written in: fields in a fixed order,
// unsigned integers as uvarints and signed ones as varints, a string (and
// a list) as its length followed by its bytes (its items), a boolean as
// one byte 0 or 1, a time as a presence byte and unix nanoseconds. Each
// row starts with its codec's version. A reader refuses a length longer
// than the bytes left and a boolean other than 0 or 1, so a corrupt row
// is an error, never a half-read row (the round-trip tests truncate every
// row at every byte).

// ErrCorrupt is a row that does not decode: a Pebble that lost bytes, or
// read models of another schema (which keys.go's schema version keeps out).
var ErrCorrupt = errors.New("projections: corrupt row")

func appendStr(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

// reader consumes a row; any malformed field sets bad and yields zeros.
type reader struct {
	b   []byte
	bad bool
	// arena, when set, keeps the strings read (NodeArena).
	arena *NodeArena
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
	var s string
	if r.arena != nil {
		s = r.arena.string(r.b[:n])
	} else {
		s = string(r.b[:n])
	}
	r.b = r.b[n:]
	return s
}

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

// digest writes a sha256 in lowercase hex (what compose.Digest makes) as
// a tag 1 and its 32 bytes, half the hex; anything else (empty, or a
// digest a log's event holds in another form) as a tag 0 and the string,
// so every row reads back exactly as written.
//
// Read and checked in one pass into a buffer on the stack: checked first
// and then decoded by encoding/hex (from a []byte copy of the string),
// a node row took twice as long to encode as with its digests in hex, and
// the fold encodes every pushed node's row twice (issue 34).
func (w *rowWriter) digest(s string) {
	var sum [sha256.Size]byte
	if len(s) != 2*sha256.Size || !lowerHexInto(&sum, s) {
		w.b = appendStr(append(w.b, 0), s)
		return
	}
	w.b = append(append(w.b, 1), sum[:]...)
}

// lowerHexInto decodes s, 64 characters, into sum, and reports whether
// every character was lowercase hex (sum is then partly written).
func lowerHexInto(sum *[sha256.Size]byte, s string) bool {
	for i := range sum {
		hi, lo := fromLowerHex[s[2*i]], fromLowerHex[s[2*i+1]]
		if hi|lo > 0xf {
			return false
		}
		sum[i] = hi<<4 | lo
	}
	return true
}

// fromLowerHex is each byte's value as a lowercase hex digit, 0xff for a
// byte that is none.
var fromLowerHex = func() (t [256]byte) {
	for i := range t {
		t[i] = 0xff
	}
	for c := byte('0'); c <= '9'; c++ {
		t[c] = c - '0'
	}
	for c := byte('a'); c <= 'f'; c++ {
		t[c] = c - 'a' + 10
	}
	return t
}()

func (r *reader) digest() string {
	if r.bad || len(r.b) == 0 || r.b[0] > 1 {
		r.bad = true
		return ""
	}
	tag := r.b[0]
	r.b = r.b[1:]
	if tag == 0 {
		return r.str()
	}
	if len(r.b) < sha256.Size {
		r.bad = true
		return ""
	}
	sum := (*[sha256.Size]byte)(r.b)
	r.b = r.b[sha256.Size:]
	// Written where the string will live: the first status after a push
	// at 100,000 nodes decodes three digests a node, and a profile of it
	// put a tenth of its CPU here when each went through encoding/hex, a
	// digit at a time, into a buffer copied afterwards (issue 34).
	if r.arena != nil {
		text := (*[2 * sha256.Size]byte)(r.arena.room(2 * sha256.Size))
		lowerHex(text, sum)
		return unsafe.String(&text[0], len(text))
	}
	var text [2 * sha256.Size]byte
	lowerHex(&text, sum)
	return string(text[:])
}

// lowerHex writes sum in lowercase hex into text, as hex.Encode does, a
// byte's two digits at once.
func lowerHex(text *[2 * sha256.Size]byte, sum *[sha256.Size]byte) {
	for i, b := range sum {
		binary.LittleEndian.PutUint16(text[2*i:], lowerHexPairs[b])
	}
}

// lowerHexPairs is each byte's two lowercase hex digits, the first in the
// low byte of the pair (where a little-endian store puts it first).
var lowerHexPairs = func() (t [256]uint16) {
	const digits = "0123456789abcdef"
	for i := range t {
		t[i] = uint16(digits[i>>4]) | uint16(digits[i&0xf])<<8
	}
	return t
}()

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
