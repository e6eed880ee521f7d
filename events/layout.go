package events

import (
	"bytes"
	"encoding"
	"encoding/base64"
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// An event's data, read the way encoding/json.Marshal writes it for its Go
// type: fields in declaration order, no whitespace, no escapes. Decoding data
// with encoding/json was most of a fold's CPU (5 µs and 21 allocations for a
// NodeEnrolled on a 2-core box): it validates the bytes in one pass, then
// reflects over them in another. A layout plan reads the one shape Encode
// writes in a single pass and answers false on anything else, so that the
// caller hands those bytes to encoding/json. It is never a second reading of
// the bytes: whatever it accepts, encoding/json decodes to the same value
// (FuzzLayout holds the two to that).

// layout is the plan for one struct type, or nil when the type has a field
// kind the plan does not read (then encoding/json always decodes it).
type layout struct {
	fields []layoutField
}

type layoutField struct {
	key       string // `"name":`, as Marshal writes it
	next      string // `,"name":`, the key after another field
	index     int
	kind      fieldKind
	omitEmpty bool // Marshal may leave the field out
	// how Marshal decides to leave it out, for writing (encode.go):
	// omitempty leaves out an empty value, omitzero a zero one.
	ifEmpty, ifZero bool
}

type fieldKind int

const (
	kindString fieldKind = iota
	kindInt
	kindUint
	kindBool
	kindTime
	kindStrings   // []string
	kindStringMap // map[string]string
	kindBytes     // []byte: base64 text, as encoding/json writes bytes
	kindSkip      // Skipped: a string or null, scanned and not kept
)

// Skipped stands in a fold view for a field the fold never reads (the
// signature of a DeclarationSent): the bytes are passed over, not decoded. It accepts any JSON value, as an absent field would.
type Skipped struct{}

// UnmarshalJSON passes over the value.
func (*Skipped) UnmarshalJSON([]byte) error { return nil }

// marshals says whether t or *t has a method encoding/json would call.
func marshals(t reflect.Type) bool {
	for _, i := range []reflect.Type{reflect.TypeFor[json.Marshaler](), reflect.TypeFor[json.Unmarshaler](),
		reflect.TypeFor[encoding.TextMarshaler](), reflect.TypeFor[encoding.TextUnmarshaler]()} {
		if t.Implements(i) || reflect.PointerTo(t).Implements(i) {
			return true
		}
	}
	return false
}

var (
	timeType    = reflect.TypeFor[time.Time]()
	byteType    = reflect.TypeFor[byte]()
	skippedType = reflect.TypeFor[Skipped]()
)

// layoutFor builds t's plan, or nil when t has a field it cannot read. A
// field encoding/json would treat specially (a Marshaler, an embedded
// struct, a ",string" option) gets no plan, so the two never disagree on it.
func layoutFor(t reflect.Type) *layout {
	if t.Kind() != reflect.Struct {
		return nil
	}
	l := &layout{}
	for i := range t.NumField() {
		f := t.Field(i)
		tag, hasTag := f.Tag.Lookup("json")
		name, opts, _ := strings.Cut(tag, ",")
		if !f.IsExported() || f.Anonymous || !hasTag || name == "" || name == "-" || strings.Contains(opts, "string") {
			return nil
		}
		kind, ok := kindOf(f.Type)
		if !ok {
			return nil
		}
		ifEmpty, ifZero := strings.Contains(opts, "omitempty"), strings.Contains(opts, "omitzero")
		key := strconv.Quote(name) + ":"
		l.fields = append(l.fields, layoutField{key: key, next: "," + key, index: i, kind: kind, omitEmpty: ifEmpty || ifZero,
			ifEmpty: ifEmpty, ifZero: ifZero})
	}
	return l
}

func kindOf(t reflect.Type) (fieldKind, bool) {
	switch {
	case t == timeType:
		return kindTime, true
	case t == skippedType:
		return kindSkip, true
	case t.Name() != "" && t.PkgPath() != "" && t.Kind() == reflect.String && !marshals(t):
		// A named string without JSON or text methods (events.Policy):
		// encoding/json writes and reads it as a plain string.
		return kindString, true
	case t.Name() != "" && t.PkgPath() != "":
		// A named type of its own (it may have JSON methods): not ours.
		return 0, false
	}
	switch t.Kind() {
	case reflect.String:
		return kindString, true
	case reflect.Int, reflect.Int64, reflect.Int32:
		return kindInt, true
	case reflect.Uint, reflect.Uint64, reflect.Uint32:
		return kindUint, true
	case reflect.Bool:
		return kindBool, true
	case reflect.Slice:
		if t.Elem().Kind() == reflect.String && t.Elem().PkgPath() == "" {
			return kindStrings, true
		}
		if t.Elem() == byteType {
			return kindBytes, true
		}
	case reflect.Map:
		if t.Key().Kind() == reflect.String && t.Elem().Kind() == reflect.String &&
			t.Key().PkgPath() == "" && t.Elem().PkgPath() == "" {
			return kindStringMap, true
		}
	}
	return 0, false
}

// decode fills v (a pointer to the plan's struct) from data, or answers
// false, leaving v to be decoded afresh by encoding/json.
func (l *layout) decode(data []byte, v any) bool {
	rv := reflect.ValueOf(v).Elem()
	r := splitter{b: data}
	r.lit("{")
	first := true
	for _, f := range l.fields {
		sep := f.key
		if !first {
			sep = f.next
		}
		if !r.bad && !bytes.HasPrefix(r.b, []byte(sep)) {
			if f.omitEmpty {
				continue
			}
			return false
		}
		r.lit(sep)
		first = false
		if !r.value(f.kind, rv.Field(f.index)) {
			return false
		}
	}
	r.lit("}")
	return !r.bad && len(r.b) == 0
}

// value reads one field's value into fv.
func (s *splitter) value(kind fieldKind, fv reflect.Value) bool {
	switch kind {
	case kindString:
		fv.SetString(s.text())
	case kindInt:
		n, err := strconv.ParseInt(s.integer(true), 10, fv.Type().Bits())
		s.bad = s.bad || err != nil
		fv.SetInt(n)
	case kindUint:
		n, err := strconv.ParseUint(s.integer(false), 10, fv.Type().Bits())
		s.bad = s.bad || err != nil
		fv.SetUint(n)
	case kindBool:
		switch {
		case s.has("true"):
			fv.SetBool(true)
		case s.has("false"):
		default:
			s.bad = true
		}
	case kindTime:
		// The strict RFC 3339 parse time.Time's UnmarshalJSON uses.
		t := fv.Addr().Interface().(*time.Time)
		s.bad = s.bad || t.UnmarshalText([]byte(s.text())) != nil
	case kindStrings:
		s.strings(fv)
	case kindStringMap:
		s.stringMap(fv)
	case kindBytes:
		s.bytes(fv)
	case kindSkip:
		if !s.has("null") {
			s.text()
		}
	}
	return !s.bad
}

// text reads a quoted string without escapes: printable ASCII, or UTF-8
// that is valid.
func (s *splitter) text() string {
	if !s.has(`"`) {
		s.bad = true
		return ""
	}
	return string(s.scan(true))
}

// integer reads JSON's integer syntax (no fraction, no exponent, no
// leading zero), which is all Marshal writes for an integer field.
func (s *splitter) integer(signed bool) string {
	if s.bad {
		return ""
	}
	i := 0
	if signed && len(s.b) > 0 && s.b[0] == '-' {
		i++
	}
	start := i
	for i < len(s.b) && s.b[i] >= '0' && s.b[i] <= '9' {
		i++
	}
	if i == start || (s.b[start] == '0' && i > start+1) {
		s.bad = true
		return ""
	}
	v := string(s.b[:i])
	s.b = s.b[i:]
	return v
}

// strings reads null (a nil slice) or an array of strings ([] is empty, not nil).
func (s *splitter) strings(fv reflect.Value) {
	if s.has("null") {
		return
	}
	if !s.has("[") {
		s.bad = true
		return
	}
	out := make([]string, 0, 1)
	for !s.bad && !s.has("]") {
		if len(out) > 0 && !s.has(",") {
			s.bad = true
			return
		}
		out = append(out, s.text())
	}
	// Through a pointer, not reflect.ValueOf: boxing the slice allocated.
	// kindOf admits only the unnamed []string, so the assertion holds.
	*fv.Addr().Interface().(*[]string) = out
}

// bytes reads null (a nil slice) or base64 text, decoded as encoding/json
// decodes a []byte: the standard encoding, and "" is empty, not nil.
func (s *splitter) bytes(fv reflect.Value) {
	if s.has("null") {
		return
	}
	if !s.has(`"`) {
		s.bad = true
		return
	}
	text := s.base64Text()
	out := make([]byte, base64.StdEncoding.DecodedLen(len(text)))
	n, err := base64.StdEncoding.Decode(out, text)
	if s.bad || err != nil {
		s.bad = true
		return
	}
	*fv.Addr().Interface().(*[]byte) = out[:n]
}

// base64Text reads the rest of a quoted string that is to be base64: up
// to its closing quote, found by IndexByte alone. scan's byte-by-byte check
// for what JSON forbids in a string (a control byte, an escape, UTF-8) is
// left to base64's decoding, which refuses every byte outside its alphabet
// but the two it skips, CR and LF: those are refused here, so the plan
// reads exactly what encoding/json reads (FuzzLayout). A declaration is
// most of a send's bytes, and scan's loop over them was a quarter of
// decoding one in a fold from the log (issue 34 point 4, a start's tail).
func (s *splitter) base64Text() []byte {
	if s.bad {
		return nil
	}
	i := bytes.IndexByte(s.b, '"')
	if i < 0 || bytes.IndexByte(s.b[:i], '\n') >= 0 || bytes.IndexByte(s.b[:i], '\r') >= 0 {
		s.bad = true
		return nil
	}
	v := s.b[:i]
	s.b = s.b[i+1:]
	return v
}

// stringMap reads null (a nil map) or an object of strings ({} is empty, not nil).
func (s *splitter) stringMap(fv reflect.Value) {
	if s.has("null") {
		return
	}
	if !s.has("{") {
		s.bad = true
		return
	}
	out := make(map[string]string, 1)
	for !s.bad && !s.has("}") {
		if len(out) > 0 && !s.has(",") {
			s.bad = true
			return
		}
		k := s.text()
		if !s.has(":") {
			s.bad = true
			return
		}
		out[k] = s.text()
	}
	*fv.Addr().Interface().(*map[string]string) = out
}
