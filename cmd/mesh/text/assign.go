package text

import (
	"fmt"
	"io"
	"strconv"

	"github.com/meshctl/mesh/wire"
)

// printAssignChanges says what an assignment changed, one line each: its
// policy, then each setting old -> new (a secret as its version).
// AssignChanges prints what an assign changed: the policy, and each
// setting old -> new.
func AssignChanges(out io.Writer, r wire.Assigned) {
	if r.PreviousPolicy != "" {
		fmt.Fprintf(out, "  policy: %s -> %s\n", r.PreviousPolicy, r.Policy)
	}
	for _, c := range r.Changes {
		fmt.Fprintf(out, "  %s: %s -> %s\n", Shown(c.Setting), settingValue(c.Old, c.Secret), settingValue(c.New, c.Secret))
	}
}

// settingValue is a setting's value as the change lines print it: not set
// (the manifest's default applies), a secret as its version, any other
// quoted, so that an empty value shows and nothing in it acts on the terminal.
func settingValue(v *string, secret bool) string {
	switch {
	case v == nil:
		return "(not set)"
	case secret:
		return *v
	}
	return strconv.Quote(*v)
}
