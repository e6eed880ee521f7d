package events

import (
	"fmt"
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
