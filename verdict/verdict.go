// Package verdict is status's decision, pure: which one state a node is in
// from what it was last sent, what it last said, and what it would be sent
// now (rules 10 and 14; wire.States). The controller reads those from its
// read models and a composition (commands/status/status.go); the verdict is here,
// with a table test and no bus, so that status, push --behind and a
// rollout's progress cannot disagree on what "current" is.
package verdict

import (
	"fmt"
	"strconv"
	"time"

	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/wire"
)

// Would is what a node would be sent now: composable, with its content
// digest, or why it cannot be composed and since when.
type Would struct {
	Composable    bool
	ContentDigest string
	Reason        string
	// Since is when the node could no longer be composed: the moment of
	// the event that moved composition when it was first found so
	// (commands/world keeps it across compositions while it stays so).
	// Zero for a Would made without that memory, which then says the
	// node's enrolment, the only moment the rows know.
	Since time.Time
}

// StateOf places a node in exactly one state: what a push cannot fix first
// (cannot be composed), then what a push would fix (never sent, behind),
// then what the node said of what it was sent (waiting, failed, refused,
// current). since is when it entered it, as far as the rows know; detail
// says why, for the states that have a why.
func StateOf(enrolledAt time.Time, sent *wire.Sent, rep *wire.Report, w Would) (state wire.State, since time.Time, detail string) {
	// A node held by its hand declaration is not judged against what the
	// mesh composes: no push sends that until one names the node.
	hand := HandHeld(sent)
	switch {
	case !hand && !w.Composable && !w.Since.IsZero():
		return wire.StateCannotCompose, w.Since, w.Reason
	case !hand && !w.Composable:
		return wire.StateCannotCompose, enrolledAt, w.Reason
	case sent == nil:
		return wire.StateNeverSent, enrolledAt, ""
	case !hand && sent.ContentDigest != w.ContentDigest:
		return wire.StateBehind, sent.At, "what it would be sent now differs from what it was sent"
	case rep == nil || rep.Digest != sent.Digest:
		return wire.StateWaiting, sent.At, ""
	case rep.Outcome == events.OutcomeFailed:
		return wire.StateFailed, rep.At, FailedShort(rep)
	case rep.Outcome == events.OutcomeRefused:
		return wire.StateRefused, rep.At, rep.Reason
	case hand:
		return wire.StateHeld, rep.At, HandHeldWhy
	}
	return wire.StateCurrent, rep.At, ""
}

// HandHeld says whether a node's last declaration was written by hand (mesh
// declare): it is held, left out of every push that does not name it.
func HandHeld(sent *wire.Sent) bool { return sent != nil && sent.By == events.ByHand }

// HandHeldWhy is the detail of a node held by its hand declaration, and
// why a push that does not name it leaves it out.
const HandHeldWhy = "hand declaration: left out of every push that does not name it; mesh push NODE sends what the mesh composes and ends the hold"

// FailedShort is a failed report in one line: its first failure, and how
// many more.
func FailedShort(r *wire.Report) string {
	if len(r.Failed) == 0 {
		return ""
	}
	s := r.Failed[0].Path + ": " + r.Failed[0].Reason
	if len(r.Failed) > 1 {
		s += " (and " + strconv.Itoa(len(r.Failed)-1) + " more)"
	}
	return s
}

// Counts is what the mesh's verdict weighs: nodes not in a well state
// (wire.WellState), programs not running or unhealthy, provider standings failing, and
// other causes (foreign messages, a halted rollout, a flooder, the bus).
type Counts struct {
	NotWell, ProgramsDown, Standings, Causes int
}

// Well is the mesh's verdict: well only when every node is in a well
// state, every program runs and is not unhealthy, no provider is failing a consumer, and
// nothing else is named.
func Well(c Counts) bool {
	return c.NotWell == 0 && c.ProgramsDown == 0 && c.Standings == 0 && c.Causes == 0
}

// Flooded says what a flooding node did: the controller's log line when it
// cuts the node, and status's cause until the flood is acknowledged.
func Flooded(node string, reports, foreign int, bytes int64, in time.Duration) string {
	return fmt.Sprintf("node %s flooded its report subjects: %d message(s) (%d foreign), %.1f MB in %s",
		node, reports, foreign, float64(bytes)/1e6, max(in, time.Second).Round(time.Second))
}
