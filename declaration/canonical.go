package declaration

import (
	"bytes"
	"strconv"
)

// CanonicalFrom is d.Canonical(), made from content: the canonical bytes
// of d's content as compose made them (compose.Result.Bytes, the bytes its
// content digest is of). The two forms list the same fields in the same
// order once past the envelope, so the declaration's bytes are the
// content's with sequence, time and chain put in after the node: encoding
// the whole declaration again (encoding/json by reflection, every
// resource's content escaped once more) was 3% of the controller's CPU a
// pushed node (issue 34, docs/performance.md "The controller's CPU, cut
// again").
//
// content must be of d's own content: the caller vouches for that, as push
// does by making d from the very compose.Result the bytes are of. What
// this checks is everything else the splice relies on, and it encodes d
// whole instead when any does not hold: a list nil (the content writes
// null where the declaration writes []), a sealed resource's box (the
// content leaves boxes out, rule 4), a mesh, node or chain that JSON
// would escape, a time JSON cannot carry, or content that does not begin
// with exactly this mesh and node. A splice that let any of these through
// would sign bytes other than Canonical's, which an agent would verify
// and then find differ from what audit and history recompute.
func (d Declaration) CanonicalFrom(content []byte) []byte {
	if d.Modules == nil || d.Resources == nil || d.Receives == nil || !plain(d.Mesh) || !plain(d.Node) || !plain(d.Previous) {
		return d.Canonical()
	}
	for _, r := range d.Resources {
		if r.Sealed != nil && r.Sealed.Box != "" {
			return d.Canonical()
		}
	}
	head := make([]byte, 0, 160+len(content))
	head = append(append(append(head, `{"mesh":"`...), d.Mesh...), `","node":"`...)
	head = append(append(head, d.Node...), `",`...)
	rest, ok := bytes.CutPrefix(content, head)
	if !ok || !bytes.HasPrefix(rest, []byte(`"modules":`)) {
		return d.Canonical()
	}
	out := append(head, `"sequence":`...)
	out = strconv.AppendUint(out, d.Sequence, 10) // as encoding/json writes it
	// What encoding/json writes for a time (its MarshalJSON: this between
	// quotes, refused alike for a year JSON cannot carry).
	out, err := d.ComposedAt.AppendText(append(out, `,"composed_at":"`...))
	if err != nil {
		return d.Canonical()
	}
	out = append(out, `","previous":"`...)
	out = append(append(out, d.Previous...), `",`...)
	return append(out, rest...)
}

// plain says JSON writes s between its quotes as it is: printable ASCII
// with no quote or backslash (encoding/json escapes nothing else once
// HTML escaping is off, as Canonical sets it).
func plain(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}
