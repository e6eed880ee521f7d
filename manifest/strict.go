package manifest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// NoDuplicateKeys refuses JSON in which an object names one key twice.
// encoding/json keeps the last of them silently, so a manifest or a
// hand-written declaration could say one thing to a reader and another to
// the mesh.
func NoDuplicateKeys(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	err := noDuplicates(dec, "")
	if errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

// noDuplicates reads one value at where (a path for the error) and every
// value inside it.
func noDuplicates(dec *json.Decoder, where string) error {
	t, err := dec.Token()
	if err != nil {
		return err
	}
	switch t {
	case json.Delim('{'):
		seen := map[string]bool{}
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return err
			}
			key, _ := k.(string)
			if seen[key] {
				return fmt.Errorf("%s names %q twice; a key may appear once", orTop(where), key)
			}
			seen[key] = true
			if err := noDuplicates(dec, where+"."+key); err != nil {
				return err
			}
		}
		_, err = dec.Token() // '}'
		return err
	case json.Delim('['):
		for i := 0; dec.More(); i++ {
			if err := noDuplicates(dec, fmt.Sprintf("%s[%d]", where, i)); err != nil {
				return err
			}
		}
		_, err = dec.Token() // ']'
		return err
	}
	return nil
}

func orTop(where string) string {
	if where == "" {
		return "the object"
	}
	return where[1:]
}

// pathFault says what in a resource path the agent could not write as
// declared: a control character (NUL would cut the path short, a newline
// forge a line in any listing of paths). "" when there is none.
func pathFault(p string) string {
	for _, c := range []byte(p) {
		if c < 0x20 || c == 0x7f {
			return fmt.Sprintf("path %q holds a control character (%#02x); paths are printable", p, c)
		}
	}
	return ""
}
