package aggregates

import (
	"fmt"
	"strings"
	"time"

	"github.com/meshctl/mesh/events"
)

// DefaultOverlap is how long a rotation's provider ends accept the
// previous credential beside the new one when the operator names no
// bound: a working day and a night, long enough for a machine switched
// off overnight or rebooting for updates to come back and apply, short
// enough that a leaked old credential does not outlive the next day.
const DefaultOverlap = 24 * time.Hour

// Stage is where a pair's last rotation is.
type Stage int

const (
	// StageAtOnce: the rotation opened no overlap (--overlap 0, or one
	// recorded before overlaps): the old credential went at once.
	StageAtOnce Stage = iota
	// StageOverlap: the provider's ends accept the old and the new
	// credential, until every consumer end applied or the bound passed.
	StageOverlap
	// StageCompleted: the overlap is over; the provider's ends were sent
	// declarations without the old credential.
	StageCompleted
)

func (s Stage) String() string {
	switch s {
	case StageOverlap:
		return "overlap"
	case StageCompleted:
		return "completed"
	}
	return "at once"
}

// Overlap is a pair's last rotation as the read models hold it, and what
// its consumer ends did since: what the completion is decided from.
type Overlap struct {
	Provider, Consumer string
	Generation         uint64
	Until              time.Time // zero: the rotation opened no overlap
	Completed          bool      // a RotationCompleted of this generation was recorded
	// Pending are the active consumer ends that have not applied a
	// declaration sent with the generation or after.
	Pending []string
}

// Stage is o's stage.
func (o Overlap) Stage() Stage {
	switch {
	case o.Until.IsZero():
		return StageAtOnce
	case o.Completed:
		return StageCompleted
	}
	return StageOverlap
}

// DecideCompletion decides whether the overlap o ends at now, and with it
// the previous credential (rule 7): once no consumer end is pending
// (reason applied), or once now reaches the bound (reason bound passed),
// whichever is first. ok is false with no error when there is nothing to
// do yet (or any more). providerEnds are the nodes holding the provider,
// in the order their declarations are to be sent: each must be composable
// without the old credential, or nothing is recorded and the refusal
// names each that is not, so the overlap holds until every end can be
// told together.
func DecideCompletion(o Overlap, providerEnds []RotationEnd, now time.Time) (ev events.RotationCompleted, ok bool, err error) {
	if o.Stage() != StageOverlap {
		return ev, false, nil
	}
	ev = events.RotationCompleted{Provider: o.Provider, Consumer: o.Consumer, Generation: o.Generation}
	switch {
	case len(o.Pending) == 0:
		ev.Reason = events.CompletedApplied
	case !now.Before(o.Until):
		ev.Reason = events.CompletedBoundPassed
	default:
		return events.RotationCompleted{}, false, nil
	}
	var problems []string
	for _, e := range providerEnds {
		if e.Problem != "" {
			problems = append(problems, e.Node+": "+e.Problem)
			continue
		}
		ev.ProviderEnds = append(ev.ProviderEnds, e.Node)
	}
	if len(problems) > 0 {
		name := fmt.Sprintf("the overlap of the credentials %s mints for %s at generation %d", o.Provider, o.Consumer, o.Generation)
		return events.RotationCompleted{}, false, Refuse("complete", name, ErrUncomposable,
			fmt.Sprintf("the old credential stays accepted, because %d of the provider's %d end(s) cannot be composed: %s", len(problems), len(providerEnds), strings.Join(problems, "; ")))
	}
	return ev, true, nil
}
