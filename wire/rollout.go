package wire

import (
	"time"

	"github.com/meshctl/mesh/events"
)

// RolloutRequest starts a rollout: the plan's waves, and whether a halted
// wave goes back to the builds it had.
type RolloutRequest struct {
	CommandID  string     `json:"command_id"`
	Module     string     `json:"module"`
	Build      string     `json:"build,omitempty"`
	Waves      []WaveSpec `json:"waves"`
	AutoRevert bool       `json:"auto_revert,omitempty"`
	// Bake and Deadline: see events.RolloutStarted.
	Bake     time.Duration `json:"bake,omitempty"`
	Deadline time.Duration `json:"deadline,omitempty"`
	// MaxParallel: see events.RolloutStarted.
	MaxParallel string `json:"max_parallel,omitempty"`
}

// RolloutControl pauses, resumes or aborts a rollout.
type RolloutControl struct {
	CommandID string `json:"command_id"`
	ID        string `json:"id"`
	Step      string `json:"step"` // events.StepPaused, StepResumed or StepAborted
}

// RolloutList is every rollout, newest last.
type RolloutList struct {
	Rollouts []Rollout `json:"rollouts"`
}

// RolloutView is one rollout as mesh rollout show says it: where it
// stands, each of its nodes' state now (status's, with why a node is
// held), and while it is open the plan of what is still to change.
type RolloutView struct {
	Rollout
	Nodes []NodeStatus `json:"nodes"`
	// Gate: while it runs, what holds the wave under way from letting the
	// next start ("" when nothing does, or none is under way).
	Gate string `json:"gate,omitempty"`
	// Plan: while the rollout is open, every wave's nodes and what would
	// change on each were it to take the build now (no change: it has).
	Plan *RolloutPlan `json:"plan,omitempty"`
}

// WaveSpec is one wave of a rollout as asked for: a name, and the selector
// of its nodes among those the module is assigned to ("*": every one not
// in an earlier wave).
type WaveSpec struct {
	Name     string `json:"name"`
	Selector string `json:"selector"`
}

// RolloutPlanRequest asks what a rollout of Module's Build (its latest
// when empty) in these waves would send, before anything is sent.
type RolloutPlanRequest struct {
	Module string     `json:"module"`
	Build  string     `json:"build,omitempty"`
	Waves  []WaveSpec `json:"waves"`
	// Auto: the rollout a new build starts by itself, over the nodes whose
	// policy is auto; never set from the bus (json "-": neither sent nor
	// read), exported only so that the controller can set it.
	Auto bool `json:"-"`
}

// RolloutPlan is every wave, its nodes, and what would change on each
// (issue 17's plan of the whole rollout, not only its first step).
type RolloutPlan struct {
	Module string     `json:"module"`
	Build  string     `json:"build"`
	Waves  []WavePlan `json:"waves"`
	// Left are the module's nodes no wave chose: a rollout leaves them on
	// the build they have.
	Left []string `json:"left"`
	// Held are the module's nodes whose policy keeps them out of this
	// rollout (pinned; or, for the rollout a new build starts by itself,
	// not auto), with the policy: no wave chooses them.
	Held []HeldNode `json:"held"`
}

// HeldNode is a node a rollout leaves where it is, and why.
type HeldNode struct {
	Node   string        `json:"node"`
	Policy events.Policy `json:"policy"`
}

// WavePlan is one wave's nodes, each with what it would be sent.
type WavePlan struct {
	Name     string        `json:"name"`
	Selector string        `json:"selector"`
	Nodes    []PlannedNode `json:"nodes"`
	Unsent   []UnsentNode  `json:"unsent"`
}
