package projections

import (
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/meshctl/mesh/events"
)

// Rollout states.
const (
	RolloutRunning  = "running"
	RolloutPaused   = "paused"
	RolloutHalted   = "halted"
	RolloutAborted  = "aborted"
	RolloutFinished = "finished"
)

// Rollout is one rollout as its steps left it. Version is the sequence of
// its aggregate's last event: the expectation of its next step.
type Rollout struct {
	events.RolloutStarted
	State string `json:"state"`
	// Wave is the wave under way (its index), -1 before the first.
	Wave     int       `json:"wave"`
	WaveAt   time.Time `json:"wave_at,omitzero"` // when the wave under way started
	Node     string    `json:"node,omitempty"`   // the node that halted it
	Why      string    `json:"why,omitempty"`
	Reverted bool      `json:"reverted,omitempty"`
	Started  time.Time `json:"started"`
	Changed  time.Time `json:"changed"`
	Version  uint64    `json:"version"`
}

// Open says whether the rollout may still move (running or paused).
func (r Rollout) Open() bool { return r.State == RolloutRunning || r.State == RolloutPaused }

func rolloutKey(id string) []byte { return append([]byte{prefixRollout}, id...) }

// foldRollouts keeps each rollout's state.
func foldRollouts(b *pebble.Batch, rec events.Recorded) error {
	at := rec.Envelope.OccurredAt
	switch ev := rec.Event.(type) {
	case events.RolloutStarted:
		return putJSON(b, rolloutKey(ev.ID), Rollout{RolloutStarted: ev, State: RolloutRunning, Wave: -1, Started: at, Changed: at, Version: rec.Seq})
	case events.RolloutStep:
		var r Rollout
		if _, err := getJSON(b, rolloutKey(ev.ID), &r); err != nil {
			return err
		}
		switch ev.Step {
		case events.StepWaveStarted:
			r.Wave, r.WaveAt = ev.Wave, at
		case events.StepHalted:
			r.State, r.Node, r.Why = RolloutHalted, ev.Node, ev.Why
		case events.StepReverted:
			r.Reverted = true
		case events.StepPaused:
			r.State = RolloutPaused
		case events.StepResumed:
			r.State = RolloutRunning
		case events.StepAborted:
			r.State = RolloutAborted
		case events.StepFinished:
			r.State = RolloutFinished
		}
		r.Changed, r.Version = at, rec.Seq
		return putJSON(b, rolloutKey(ev.ID), r)
	}
	return nil
}

// Rollouts lists every rollout, by id.
func (v *View) Rollouts() ([]Rollout, error) { return decodeRows[Rollout](v.r, prefixRollout) }

// Rollout reads one rollout.
func (v *View) Rollout(id string) (Rollout, bool, error) {
	var r Rollout
	found, err := getJSON(v.r, rolloutKey(id), &r)
	return r, found, err
}
