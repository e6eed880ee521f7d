package events

import (
	"encoding/base64"
	"reflect"
	"slices"
	"strconv"
	"sync"
	"time"
)

// Writing an event the way encoding/json.Marshal writes it, without it:
// Marshal reflected over every append's envelope and data (a push's
// DeclarationSent, 1,600 bytes of it base64) and was a twentieth of the
// controller's CPU in a push (issue 34). The plan is the layout the fold
// reads with; it writes exactly Marshal's bytes or answers false, and then
// Marshal writes them: a string Marshal would escape, a time it would
// refuse or write with an offset, a type with a plan it has not got.
// TestEncodeWritesWhatMarshalWrites holds the two to the same bytes.

// encodePlans are the plans by event type, built once a type (nil: none).
var encodePlans sync.Map // reflect.Type -> *layout

func encodePlan(t reflect.Type) *layout {
	if l, ok := encodePlans.Load(t); ok {
		return l.(*layout)
	}
	var l *layout
	if !marshals(t) {
		l = layoutFor(t)
	}
	encodePlans.Store(t, l)
	return l
}

// appendEncoded appends the envelope of m around ev as Marshal writes an
// outgoing, or answers false.
func appendEncoded(dst []byte, m Meta, ev Event) ([]byte, bool) {
	rv := reflect.ValueOf(ev)
	if rv.Kind() != reflect.Struct {
		return nil, false
	}
	l := encodePlan(rv.Type())
	if l == nil {
		return nil, false
	}
	if dst == nil {
		// Room for all of it, so that it is written once, not grown and
		// copied: the base64 of its bytes is most of a send.
		n := 160 + len(m.ID) + len(m.Type) + len(m.Aggregate.Kind) + len(m.Aggregate.ID) + len(m.CommandID) + len(m.By)
		for _, f := range l.fields {
			n += len(f.next) + 32
			switch f.kind {
			case kindString:
				n += rv.Field(f.index).Len()
			case kindBytes:
				n += base64.StdEncoding.EncodedLen(rv.Field(f.index).Len())
			}
		}
		dst = make([]byte, 0, n)
	}
	ok := true
	dst = append(dst, `{"id":`...)
	dst, ok = appendPlain(dst, m.ID, ok)
	dst = append(dst, `,"type":`...)
	dst, ok = appendPlain(dst, m.Type, ok)
	dst = append(dst, `,"version":`...)
	dst = strconv.AppendInt(dst, int64(m.Version), 10)
	dst = append(dst, `,"aggregate":{"kind":`...)
	dst, ok = appendPlain(dst, m.Aggregate.Kind, ok)
	dst = append(dst, `,"id":`...)
	dst, ok = appendPlain(dst, m.Aggregate.ID, ok)
	dst = append(dst, `},"occurred_at":`...)
	dst, ok = appendTime(dst, m.OccurredAt, ok)
	dst = append(dst, `,"command_id":`...)
	dst, ok = appendPlain(dst, m.CommandID, ok)
	if m.By != "" {
		dst = append(dst, `,"by":`...)
		dst, ok = appendPlain(dst, m.By, ok)
	}
	dst = append(dst, `,"data":`...)
	dst, ok = l.encode(dst, rv, ok)
	return append(dst, '}'), ok
}

// encode appends the struct rv as Marshal writes it, or answers false.
func (l *layout) encode(dst []byte, rv reflect.Value, ok bool) ([]byte, bool) {
	dst = append(dst, '{')
	first := true
	for _, f := range l.fields {
		fv := rv.Field(f.index)
		if f.omits(fv) {
			continue
		}
		if first {
			dst = append(dst, f.key...)
		} else {
			dst = append(dst, f.next...)
		}
		first = false
		switch f.kind {
		case kindString:
			dst, ok = appendPlain(dst, fv.String(), ok)
		case kindInt:
			dst = strconv.AppendInt(dst, fv.Int(), 10)
		case kindUint:
			dst = strconv.AppendUint(dst, fv.Uint(), 10)
		case kindBool:
			dst = strconv.AppendBool(dst, fv.Bool())
		case kindTime:
			dst, ok = appendTime(dst, fv.Interface().(time.Time), ok)
		case kindBytes:
			if fv.IsNil() {
				dst = append(dst, "null"...)
				break
			}
			dst = append(dst, '"')
			dst = base64.StdEncoding.AppendEncode(dst, fv.Bytes())
			dst = append(dst, '"')
		case kindStrings:
			if fv.IsNil() {
				dst = append(dst, "null"...)
				break
			}
			dst = append(dst, '[')
			for i := range fv.Len() {
				if i > 0 {
					dst = append(dst, ',')
				}
				dst, ok = appendPlain(dst, fv.Index(i).String(), ok)
			}
			dst = append(dst, ']')
		case kindStringMap:
			if fv.IsNil() {
				dst = append(dst, "null"...)
				break
			}
			// Marshal writes a map's keys in order.
			keys := make([]string, 0, fv.Len())
			for it := fv.MapRange(); it.Next(); {
				keys = append(keys, it.Key().String())
			}
			slices.Sort(keys)
			dst = append(dst, '{')
			for i, k := range keys {
				if i > 0 {
					dst = append(dst, ',')
				}
				dst, ok = appendPlain(dst, k, ok)
				dst = append(dst, ':')
				dst, ok = appendPlain(dst, fv.MapIndex(reflect.ValueOf(k)).String(), ok)
			}
			dst = append(dst, '}')
		default:
			// Skipped is a view for reading, never written.
			ok = false
		}
	}
	return append(dst, '}'), ok
}

// omits says whether Marshal leaves the field's value out.
func (f layoutField) omits(fv reflect.Value) bool {
	if f.ifZero {
		// Marshal asks a time its own IsZero, which a zero instant in
		// another location (time.Local on a UTC host) answers true and
		// reflection, seeing the location, false.
		if f.kind == kindTime {
			if t, _ := fv.Interface().(time.Time); t.IsZero() {
				return true
			}
		} else if fv.IsZero() {
			return true
		}
	}
	if !f.ifEmpty {
		return false
	}
	switch f.kind {
	case kindString, kindBytes, kindStrings, kindStringMap:
		return fv.Len() == 0
	case kindInt:
		return fv.Int() == 0
	case kindUint:
		return fv.Uint() == 0
	case kindBool:
		return !fv.Bool()
	}
	return false // a struct (a time) is never empty to Marshal
}

// appendPlain appends s quoted when Marshal would write it with no escape:
// printable ASCII but for the quote, the backslash and the three HTML
// characters Marshal escapes. Anything else answers false.
func appendPlain(dst []byte, s string, ok bool) ([]byte, bool) {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			ok = false
			break
		}
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"'), ok
}

// appendTime appends t as time.Time's MarshalJSON does, for a time in UTC
// (or at its offset 0) within the years it writes.
func appendTime(dst []byte, t time.Time, ok bool) ([]byte, bool) {
	if _, off := t.Zone(); off != 0 || t.Year() < 0 || t.Year() > 9999 {
		ok = false
	}
	dst = append(dst, '"')
	dst = t.AppendFormat(dst, time.RFC3339Nano)
	return append(dst, '"'), ok
}
