package events

// A rollout moves a module's nodes to a new build in waves (issue 17). It
// is an aggregate of its own, mesh.ev.rollout.<id>.>: every step is a
// checked append on it, so two controllers never take one step twice.

// KindRollout is the aggregate kind of rollouts.
const KindRollout = "rollout"

// RolloutAggregate is the aggregate of the rollout called id.
func RolloutAggregate(id string) AggregateID { return AggregateID{Kind: KindRollout, ID: id} }

// RolloutWave is one wave: its name, the selector that chose it, and the
// nodes chosen when the rollout started.
type RolloutWave struct {
	Name     string   `json:"name"`
	Selector string   `json:"selector"`
	Nodes    []string `json:"nodes"`
}

// RolloutStarted: a rollout of Module's Build in Waves, each node's build
// before it (Previous, what --auto-revert sends back).
type RolloutStarted struct {
	ID         string            `json:"id"`
	Module     string            `json:"module"`
	Build      string            `json:"build"`
	Waves      []RolloutWave     `json:"waves"`
	Previous   map[string]string `json:"previous"`
	AutoRevert bool              `json:"auto_revert"`
	// BakeSeconds: a wave that applied the build is watched this long
	// before the next starts. DeadlineSeconds: a wave that has not applied
	// it this long after it started halts the rollout. 0: none.
	BakeSeconds     int `json:"bake_seconds,omitempty"`
	DeadlineSeconds int `json:"deadline_seconds,omitempty"`
	// MaxParallel bounds how many nodes of a wave are sent the build and
	// not yet applied it at once: a count, or a percentage of the wave
	// ("25%"). Empty: the whole wave at once.
	MaxParallel string `json:"max_parallel,omitempty"`
	// Auto: no operator started it; Build was registered and the nodes
	// whose policy is auto asked for it (rule 23).
	Auto bool `json:"auto,omitempty"`
}

// Rollout steps: what a RolloutStep says happened.
const (
	StepWaveStarted = "wave started" // Wave's nodes are moved to the build and sent it
	StepHalted      = "halted"       // Node failed or refused its apply (Why); nothing moves on
	StepReverted    = "reverted"     // the halted wave was sent back to its builds before
	StepPaused      = "paused"
	StepResumed     = "resumed"
	StepAborted     = "aborted"
	StepFinished    = "finished" // every wave applied
)

// RolloutStep: one step of a rollout, by the controller that took it.
type RolloutStep struct {
	ID   string `json:"id"`
	Step string `json:"step"`
	Wave int    `json:"wave"`
	Node string `json:"node,omitempty"`
	Why  string `json:"why,omitempty"`
}

func (RolloutStarted) EventType() string { return "RolloutStarted" }
func (RolloutStep) EventType() string    { return "RolloutStep" }
