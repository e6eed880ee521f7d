package projections

import (
	"github.com/cockroachdb/pebble/v2"
	"github.com/meshctl/mesh/events"
)

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
	return getOne[Rollout](v.r, rolloutKey(id))
}
