package aggregates

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

// Rule 7, rotation all or nothing: every end carries the next generation,
// or none does and the refusal names each end that cannot. Each row fails
// when the decision, its kind or its sentence changes.
func TestDecideRotation(t *testing.T) {
	ok := []RotationEnd{{Node: "app-1"}, {Node: "db-1"}}
	cases := []struct {
		name   string
		linked bool
		ends   []RotationEnd
		kind   error
		says   string
		want   []string
	}{
		{"every end composes: the next generation at both", true, ok, nil, "", []string{"app-1", "db-1"}},
		{"no end", true, nil, ErrInvalid, "neither module is assigned", nil},
		{"not linked", false, ok, ErrInvalid, "no build of postgres assigned provisions a credential that app consumes", nil},
		{"one end cannot: nothing, naming it", true, []RotationEnd{{Node: "app-1", Problem: "app is left out"}, {Node: "db-1"}}, ErrUncomposable,
			"1 of its 2 end(s) cannot be composed: app-1: app is left out", nil},
	}
	for _, c := range cases {
		ev, err := DecideRotation("postgres", "app", 4, c.linked, c.ends, 0, time.Time{})
		switch {
		case c.kind == nil && (err != nil || ev.Generation != 5 || !slices.Equal(ev.Ends, c.want)):
			t.Errorf("%s: %+v %v", c.name, ev, err)
		case c.kind != nil && (!errors.Is(err, c.kind) || !strings.Contains(err.Error(), c.says) || ev.Generation != 0 || len(ev.Ends) != 0):
			t.Errorf("%s: %+v %v, want a refusal of kind %v saying %q", c.name, ev, err, c.kind, c.says)
		}
	}
}
