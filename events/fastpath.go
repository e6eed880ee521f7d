package events

import (
	"bytes"
	"strconv"
	"time"
	"unicode/utf8"
)

// splitEnvelope reads an envelope laid out exactly as Encode writes it:
//
//	{"id":"…","type":"…","version":N,"aggregate":{"kind":"…","id":"…"},"occurred_at":"…","command_id":"…"[,"by":"…"],"data":…}
//
// without a general JSON parse, answering the fields a fold needs and the
// raw bytes of data. Every string but data's is a validated token or a time,
// so none holds an escape; anything else (another field order, an escape, a
// writer that is not mesh) answers ok false and takes the general decoder.
// Decoding the envelope was half of a fold's CPU; this is the fold's path.
func splitEnvelope(raw []byte, want string) (typ string, version int, at time.Time, by string, data []byte, ok bool) {
	r := splitter{b: raw}
	// The fields a fold does not read are checked, not copied: a string
	// allocated per field and dropped was a third of decoding's garbage.
	r.lit(`{"id":"`)
	r.raw()
	r.lit(`,"type":"`)
	typ = r.name(want)
	r.lit(`,"version":`)
	version = r.num()
	r.lit(`,"aggregate":{"kind":"`)
	r.raw()
	r.lit(`,"id":"`)
	r.raw()
	r.lit(`},"occurred_at":"`)
	ts := r.raw()
	r.lit(`,"command_id":"`)
	r.raw()
	if r.has(`,"by":"`) {
		// Who asked (issue 33): history names them, so the fold reads it.
		by = string(r.raw())
	}
	r.lit(`,"data":`)
	if r.bad || len(r.b) < 2 || r.b[len(r.b)-1] != '}' {
		return "", 0, time.Time{}, "", nil, false
	}
	// UnmarshalText is the strict RFC 3339 parse encoding/json uses.
	if err := at.UnmarshalText(ts); err != nil {
		return "", 0, time.Time{}, "", nil, false
	}
	return typ, version, at, by, r.b[:len(r.b)-1], true
}

// name reads a string and answers want itself when they are the same, so
// that the type a caller expects costs no allocation.
func (s *splitter) name(want string) string {
	if b := s.raw(); string(b) != want {
		return string(b)
	}
	return want
}

type splitter struct {
	b   []byte
	bad bool
}

func (s *splitter) lit(l string) {
	if !s.has(l) {
		s.bad = true
	}
}

// has consumes l when the input starts with it.
func (s *splitter) has(l string) bool {
	if s.bad || !bytes.HasPrefix(s.b, []byte(l)) {
		return false
	}
	s.b = s.b[len(l):]
	return true
}

// raw reads up to the closing quote. Only printable ASCII without escapes
// is ours to read: anything else (an escape, a control character JSON
// forbids, UTF-8 the general decoder would rewrite) goes to the general path.
func (s *splitter) raw() []byte { return s.scan(false) }

// scan reads up to the closing quote a string without escapes or control
// characters; with utf8ok, valid UTF-8 too (encoding/json rewrites invalid
// bytes, so those always go to it).
func (s *splitter) scan(utf8ok bool) []byte {
	if s.bad {
		return nil
	}
	i := bytes.IndexByte(s.b, '"')
	if i < 0 {
		s.bad = true
		return nil
	}
	ascii := true
	for _, c := range s.b[:i] {
		if c < 0x20 || c == '\\' || c == 0x7f {
			s.bad = true
			return nil
		}
		ascii = ascii && c < 0x80
	}
	if !ascii && (!utf8ok || !utf8.Valid(s.b[:i])) {
		s.bad = true
		return nil
	}
	v := s.b[:i]
	s.b = s.b[i+1:]
	return v
}

// num reads the envelope's version by JSON's integer syntax: a leading
// zero, which strconv would take, is not JSON, and the general decoder
// refuses it.
func (s *splitter) num() int {
	n, err := strconv.Atoi(s.integer(false))
	if err != nil {
		s.bad = true
		return 0
	}
	return n
}
