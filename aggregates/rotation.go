package aggregates

import (
	"fmt"
	"strings"
	"time"

	"github.com/meshctl/mesh/events"
)

// RotationEnd is one node holding either module of a pair being rotated,
// and why its declaration would not carry the new credential ("" when it
// would: it composes, and its end of the pair is neither left out nor
// unresolved).
type RotationEnd struct {
	Node, Problem string
}

// DecideRotation decides a rotation of the credentials provider mints for
// consumer (rule 7, all or nothing): from generation, the pair's current
// one, to the next, carried by every end at once, or refused naming each
// end that cannot carry it, so that no end takes a credential the other
// does not have. linked says whether a build of provider assigned
// provisions something consumer consumes; ends are in the order the
// declarations are to be sent. overlap is how long at most the provider's
// ends accept the previous generation beside the new one (0: not at all),
// from now.
func DecideRotation(provider, consumer string, generation uint64, linked bool, ends []RotationEnd, overlap time.Duration, now time.Time) (events.CredentialRotated, error) {
	ev := events.CredentialRotated{Provider: provider, Consumer: consumer}
	name := fmt.Sprintf("the credentials %s mints for %s", provider, consumer)
	switch {
	case overlap < 0:
		return ev, Refuse("rotate", name, ErrInvalid, fmt.Sprintf("the overlap %s is negative: give a duration such as 24h, or 0 for none", overlap))
	case len(ends) == 0:
		return ev, Refuse("rotate", name, ErrInvalid, "neither module is assigned to an active node: there is nothing to rotate")
	case !linked:
		return ev, Refuse("rotate", name, ErrInvalid, fmt.Sprintf("no build of %s assigned provisions a credential that %s consumes: there is nothing to rotate", provider, consumer))
	}
	var problems []string
	for _, e := range ends {
		if e.Problem != "" {
			problems = append(problems, e.Node+": "+e.Problem)
			continue
		}
		ev.Ends = append(ev.Ends, e.Node)
	}
	if len(problems) > 0 {
		return events.CredentialRotated{Provider: provider, Consumer: consumer}, Refuse("rotate", name, ErrUncomposable,
			fmt.Sprintf("nothing was sent and nothing recorded, because %d of its %d end(s) cannot be composed: %s", len(problems), len(ends), strings.Join(problems, "; ")))
	}
	ev.Generation = generation + 1
	if overlap > 0 {
		ev.OverlapUntil = now.Add(overlap).UTC()
	}
	return ev, nil
}
