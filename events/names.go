package events

import (
	"fmt"
	"strings"
)

// MaxNameLen bounds a name that becomes a subject token. 63 is the DNS label
// limit, so a node name can also be a host name.
const MaxNameLen = 63

// ValidateName reports whether s may be used as a node or module name. Names
// become single subject tokens (mesh.ev.node.<name>.…), so a '.', '*' or '>'
// would change which messages a filter matches: a node called "a.>" could read
// every other node's declarations. Hence a closed alphabet rather than a deny list.
func ValidateName(kind, s string) error {
	if s == "" {
		return fmt.Errorf("%s name is empty: use 1 to %d lowercase letters, digits and '-', starting with a letter or digit", kind, MaxNameLen)
	}
	if len(s) > MaxNameLen {
		return fmt.Errorf("%s name %q is %d characters long: use at most %d lowercase letters, digits and '-'", kind, s, len(s), MaxNameLen)
	}
	for i, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
		case r == '-' && i > 0:
		default:
			return fmt.Errorf("%s name %q contains %q: use 1 to %d lowercase letters, digits and '-', starting with a letter or digit", kind, s, r, MaxNameLen)
		}
	}
	return nil
}

// ValidateLabelKey reports whether k may name a node label: enrolment holds
// a node's labels to it, and a manifest that chooses its provider by a
// label (choose.REQ.label) names one by the same rule.
func ValidateLabelKey(k string) error {
	ok := k != "" && len(k) <= 63
	for _, r := range k {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./", r)) {
			ok = false
		}
	}
	if !ok {
		return fmt.Errorf("label key %q is not allowed: use 1 to 63 letters, digits, '-', '_', '.' or '/'", k)
	}
	return nil
}
