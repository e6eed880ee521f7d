package text

import (
	"reflect"
	"strconv"
	"unicode"
	"unicode/utf8"
)

// What a node wrote (a report's reasons, a program's exit, drift, facts, a
// standing's word, a foreign message's claims) reaches the operator's
// terminal. Raw, it could carry escape codes, or a newline and a line of
// its own making ("well: all 3 node(s) current") (issue 29). So every
// command prints such text through shown, one rule for all: a string a
// terminal shows as it is stays as it is, and any other is printed quoted,
// Go-escaped, so nothing in it acts on the terminal and a reader sees at
// once that it held something odd. --json output is JSON's own escaping.

// Shown is s as a terminal may print it.
func Shown(s string) string {
	// Printable ASCII, which nearly every string is, is shown as it is
	// without decoding a rune: a status of 100,000 nodes shows 100,000
	// names and as many details.
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < ' ' || c > '~' {
			return shownOther(s)
		}
	}
	return s
}

// shownOther is Shown of a string that is not all printable ASCII.
func shownOther(s string) string {
	if !utf8.ValidString(s) {
		return strconv.Quote(s)
	}
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return strconv.Quote(s)
		}
	}
	return s
}

// Showable makes every string in v, which is about to be printed as text,
// shown: in place, through pointers, structs, slices and maps (keys too).
// v is an answer the command just read; its JSON is never printed after.
func Showable(v any) { showValue(reflect.ValueOf(v)) }

var stringsType = reflect.TypeFor[[]string]()

func showValue(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			showValue(v.Elem())
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if f := v.Field(i); f.CanSet() {
				showValue(f)
			}
		}
	case reflect.Slice, reflect.Array:
		// A column of strings (a status table's names and details) in a
		// plain loop: through reflection a string at a time it was a
		// tenth of mesh status's CPU at 100,000 nodes.
		if v.Kind() == reflect.Slice && v.Type() == stringsType {
			column := v.Interface().([]string)
			for i, s := range column {
				if shown := Shown(s); shown != s {
					column[i] = shown
				}
			}
			return
		}
		switch v.Type().Elem().Kind() {
		case reflect.String, reflect.Struct, reflect.Pointer, reflect.Slice, reflect.Array, reflect.Map:
		default:
			// Numbers, and bytes (raw JSON, printed through shown where
			// printed): a status of 100,000 nodes has columns of them.
			return
		}
		for i := range v.Len() {
			showValue(v.Index(i))
		}
	case reflect.Map:
		if v.IsNil() {
			return
		}
		for _, k := range v.MapKeys() {
			e := reflect.New(v.Type().Elem()).Elem()
			e.Set(v.MapIndex(k))
			showValue(e)
			nk := reflect.New(k.Type()).Elem()
			nk.Set(k)
			showValue(nk)
			v.SetMapIndex(k, reflect.Value{})
			v.SetMapIndex(nk, e)
		}
	case reflect.String:
		if v.CanSet() {
			v.SetString(Shown(v.String()))
		}
	}
}
