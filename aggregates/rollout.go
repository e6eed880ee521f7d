package aggregates

import (
	"cmp"
	"fmt"
	"time"

	"github.com/meshctl/mesh/events"
)

// The rollout's decisions (rule 23), pure: what one step of a running
// rollout does, from what the read models say of the nodes of its wave.
// The controller reads (commands/rolloutdrive.go), decides here, and acts;
// each decision is a table test with no bus (rollout_test.go).

// WaveNode is what a rollout step knows of one node of its wave.
type WaveNode struct {
	Node string
	// Out: retired, unassigned, or with no build to move to; out of the
	// rollout.
	Out bool
	// Moved: its assignment holds the build this step moves it to. Sent:
	// it was sent a declaration since. Answered: it reported on that send,
	// with Outcome and Why.
	Moved, Sent, Answered bool
	Outcome               events.Outcome
	Why                   string
}

// WaveHalt is a node of a wave that halts the rollout, and why: it failed
// or refused its new build, its program crash-loops on it, or the wave
// passed its deadline.
type WaveHalt struct{ Node, Why string }

func (w *WaveHalt) Error() string { return w.Node + ": " + w.Why }

// WaveProgress is one step of moving a wave's nodes to their build: send
// those moved and not sent (Send), else move more (Move), at most limit
// moved and not yet answered at once; Done when every node in the rollout
// applied it. A node that failed or refused the build halts the rollout
// (the first such, in the wave's order). A node is moved only when it is
// about to be sent, so push --behind never finds one a wave has not
// reached; a step is safe to repeat (what is moved or sent is not again).
type WaveProgress struct {
	Send, Move []string
	Done       bool
	Halt       *WaveHalt
}

// ProgressWave decides a wave's next moves and sends.
func ProgressWave(nodes []WaveNode, limit int) WaveProgress {
	var toMove, toSend []string
	done, inFlight := true, 0
	for _, n := range nodes {
		switch {
		case n.Out:
		case !n.Moved:
			toMove, done = append(toMove, n.Node), false
		case !n.Sent:
			toSend, done = append(toSend, n.Node), false
		case !n.Answered:
			inFlight, done = inFlight+1, false
		case n.Outcome == events.OutcomeFailed:
			return WaveProgress{Halt: &WaveHalt{Node: n.Node, Why: "failed: " + n.Why}}
		case n.Outcome == events.OutcomeRefused:
			return WaveProgress{Halt: &WaveHalt{Node: n.Node, Why: "refused: " + n.Why}}
		}
	}
	room := limit - inFlight
	switch {
	case room <= 0:
		return WaveProgress{}
	case len(toSend) > 0:
		return WaveProgress{Send: toSend[:min(room, len(toSend))]}
	case len(toMove) > 0:
		return WaveProgress{Move: toMove[:min(room, len(toMove))]}
	}
	return WaveProgress{Done: done}
}

// GateNode is what the gate knows of one node of a wave that applied its
// build.
type GateNode struct {
	Node string
	// Reported: it reported at all (ReportedAt); a node that did not is
	// out of the gate, as one retired meanwhile.
	Reported   bool
	ReportedAt time.Time
	// Runtime is its program's state of the module ("" not reported yet),
	// with Detail and since when (RuntimeSince), when the build runs one.
	Runtime, RuntimeDetail string
	RuntimeSince           time.Time
	// Health is what the program's check last said (HealthStarting,
	// HealthHealthy, HealthUnhealthy; "" none since the program started),
	// why (HealthDetail) and since when, when the build's run has a check.
	Health, HealthDetail string
	HealthSince          time.Time
	// Applied is the sequence of the declaration it applied the build
	// in, and RuntimeDeclaration the one its program's process started
	// under: at or above Applied, the process is the build's.
	Applied, RuntimeDeclaration uint64
	// Standing is the first provider standing failing that involves the
	// node or the module, said as a sentence; "" for none.
	Standing string
}

// GateHold is the first node of a wave that holds the next wave back
// though it applied the build, and why; Baking when only the bake does.
type GateHold struct {
	Node, Why string
	Baking    bool
}

// The runtime states the gate reads: projections.RuntimeRunning and
// RuntimeCrashLooping are these (TestTheGateReadsTheFoldsRuntimeStates).
const (
	RuntimeRunning      = "running"
	RuntimeCrashLooping = "crash-looping"
)

// The health the gate reads: wire.HealthHealthy and HealthUnhealthy are
// these (TestTheGateReadsTheFoldsRuntimeStates).
const (
	HealthHealthy   = "healthy"
	HealthUnhealthy = "unhealthy"
)

// Gate is the gate a wave that applied its build passes before the next
// starts (rule 23): each node's program, when the build runs one (runs),
// is running, and healthy when its run has a check (checked); no provider
// standing involving the node or the module is failing; and each has
// stood the bake since it applied (and since its program last started or
// turned healthy). A crash-looping program halts the rollout, even past a
// node that holds it, and so does one that turned unhealthy after its
// node applied the build, or whose process started under the build's
// declaration: a failure of the build, as a failed apply is. Another
// unhealthy one only holds: that word may be its predecessor's, whose
// process the build's has not replaced yet.
func Gate(nodes []GateNode, runs, checked bool, bake time.Duration, now time.Time) (GateHold, *WaveHalt) {
	var hold GateHold
	for _, n := range nodes {
		if !n.Reported {
			continue
		}
		since := n.ReportedAt
		if runs {
			switch {
			case n.Runtime == RuntimeCrashLooping:
				return GateHold{}, &WaveHalt{Node: n.Node, Why: "its program is crash-looping: " + n.RuntimeDetail}
			case n.Runtime != RuntimeRunning && hold.Node == "":
				hold = GateHold{Node: n.Node, Why: "its program is not running (" + cmp.Or(n.Runtime, "not reported yet") + ")"}
			}
			if n.RuntimeSince.After(since) {
				since = n.RuntimeSince
			}
		}
		if runs && checked && n.Runtime == RuntimeRunning {
			switch {
			case n.Health == HealthUnhealthy && (n.RuntimeDeclaration >= n.Applied || !n.HealthSince.Before(n.ReportedAt)):
				return GateHold{}, &WaveHalt{Node: n.Node, Why: "its program is unhealthy: " + n.HealthDetail}
			case n.Health == HealthUnhealthy && hold.Node == "":
				hold = GateHold{Node: n.Node, Why: "its program is unhealthy since before it applied the build (" + n.HealthDetail + "); waiting for its check under the build"}
			case n.Health == HealthHealthy && n.RuntimeDeclaration < n.Applied && hold.Node == "":
				// The node reports applied before its agent restarts the
				// program: the healthy process is still the one from
				// before the build, and passing the wave on its word let a
				// build whose check fails finish (a rollout with no bake,
				// on a loaded box). Held until a process of the build says.
				hold = GateHold{Node: n.Node, Why: fmt.Sprintf("its program's process is from before the build (started under declaration %d, the build came in %d); waiting for it to start again", n.RuntimeDeclaration, n.Applied)}
			case n.Health != HealthHealthy && hold.Node == "":
				hold = GateHold{Node: n.Node, Why: "its program is not healthy yet (" + cmp.Or(n.Health, "no check reported yet") + ")"}
			}
			if n.Health == HealthHealthy && n.HealthSince.After(since) {
				since = n.HealthSince
			}
		}
		if n.Standing != "" && hold.Node == "" {
			hold = GateHold{Node: n.Node, Why: n.Standing}
		}
		if until := since.Add(bake); hold.Node == "" && now.Before(until) {
			hold = GateHold{Node: n.Node, Why: "baking until " + until.UTC().Format(time.RFC3339), Baking: true}
		}
	}
	return hold, nil
}

// RolloutAt is where a running rollout stands: its wave (-1 before the
// first), how many waves it has, when the wave started and its deadline
// (0 for none).
type RolloutAt struct {
	Wave, Waves int
	WaveAt      time.Time
	Deadline    time.Duration
}

// RolloutStepKind is what one step of a rollout does.
type RolloutStepKind int

const (
	// StepWait: the wave waits for agents, a program, a standing or the bake.
	StepWait RolloutStepKind = iota
	// StepStartWave: Wave starts.
	StepStartWave
	// StepFinish: the last wave passed its gate.
	StepFinish
	// StepHalt: Halt stops the rollout (and with auto-revert, sends its
	// wave back).
	StepHalt
)

// RolloutStep is the decision of one step.
type RolloutStep struct {
	Kind RolloutStepKind
	Wave int
	Halt *WaveHalt
}

// NextRolloutStep decides a running rollout's step from the wave's
// progress (done: every node applied), its gate (hold, when done), a halt
// either found, and the first node of the wave not applied (for a deadline
// passed before it applied). A wave past its deadline halts, unless only
// its bake holds it: the bake is the operator's own wait.
func NextRolloutStep(at RolloutAt, done bool, hold GateHold, halt *WaveHalt, notApplied string, now time.Time) RolloutStep {
	if at.Wave < 0 {
		return RolloutStep{Kind: StepStartWave, Wave: 0}
	}
	late := at.Deadline > 0 && now.After(at.WaveAt.Add(at.Deadline))
	switch {
	case halt != nil:
		return RolloutStep{Kind: StepHalt, Wave: at.Wave, Halt: halt}
	case !done && late:
		return RolloutStep{Kind: StepHalt, Wave: at.Wave, Halt: &WaveHalt{Node: notApplied, Why: fmt.Sprintf("it did not apply the build within the wave's deadline of %s", at.Deadline)}}
	case hold.Node != "" && late && !hold.Baking:
		return RolloutStep{Kind: StepHalt, Wave: at.Wave, Halt: &WaveHalt{Node: hold.Node, Why: fmt.Sprintf("%s, past the wave's deadline of %s", hold.Why, at.Deadline)}}
	case !done || hold.Node != "":
		return RolloutStep{Kind: StepWait, Wave: at.Wave}
	case at.Wave == at.Waves-1:
		return RolloutStep{Kind: StepFinish, Wave: at.Wave}
	}
	return RolloutStep{Kind: StepStartWave, Wave: at.Wave + 1}
}
