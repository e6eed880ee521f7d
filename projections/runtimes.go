package projections

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/wire"
)

// Drift is the last drift a node's agent found under its root since the
// declaration of Sequence was applied.
type Drift struct {
	Sequence  uint64    `json:"sequence"`
	Paths     []string  `json:"paths"`
	Corrected bool      `json:"corrected"`
	At        time.Time `json:"at"`
	Seq       uint64    `json:"seq"`
}

// foldRuntimes keeps each runtime's state and each node's last drift.
func foldRuntimes(b *pebble.Batch, rec events.Recorded) error {
	if d, ok := rec.Event.(events.DriftFound); ok {
		return putJSON(b, append([]byte{prefixDrift}, d.Node...), Drift{Sequence: d.Sequence, Paths: d.Paths, Corrected: d.Corrected, At: rec.Envelope.OccurredAt, Seq: rec.Seq})
	}
	module := events.RuntimeModule(rec.Event)
	if module == "" {
		return nil
	}
	node := events.Rights[rec.Event.EventType()].Name(rec.Event)
	key := pairKey(prefixRuntime, node, module)
	var r Runtime
	if _, err := getJSON(b, key, &r); err != nil {
		return err
	}
	at := rec.Envelope.OccurredAt
	looping := r.State == RuntimeCrashLooping
	r.Node, r.Module, r.Seq = node, module, rec.Seq
	switch ev := rec.Event.(type) {
	case events.RuntimeStopped:
		return b.Delete(key, nil)
	case events.RuntimeStarted:
		r.PID, r.Detail, r.StartedUnder, r.Digest = ev.PID, fmt.Sprintf("pid %d, declaration %d", ev.PID, ev.Sequence), ev.Sequence, ev.Digest
		if !looping {
			r.State, r.Since = RuntimeRunning, at
		}
		// A new process is a new question: what its predecessor's check
		// said is not its health (a rollout's gate would pass a program
		// that never answered).
		r.Health, r.HealthSince, r.HealthDetail = "", time.Time{}, ""
		if ev.Checked {
			r.Health, r.HealthSince = wire.HealthStarting, at
		}
	case events.RuntimeHealthy:
		r.Health, r.HealthSince, r.HealthDetail = wire.HealthHealthy, at, ""
	case events.RuntimeUnhealthy:
		r.Health, r.HealthSince, r.HealthDetail = wire.HealthUnhealthy, at, fmt.Sprintf("%d failed check(s) in a row; %s", ev.Failures, ev.Reason)
	case events.RuntimeExited:
		r.PID, r.Detail = 0, ev.Detail()
		if !looping {
			r.State, r.Since = RuntimeExited, at
		}
	case events.RuntimeCrashLooping:
		r.State, r.Since, r.Detail = RuntimeCrashLooping, at, fmt.Sprintf("%d exits within %d s; %s", ev.Exits, ev.Seconds, r.Detail)
	case events.RuntimeSteady:
		r.State, r.Since, r.Detail = RuntimeRunning, at, "steady again after crash-looping"
	}
	return putJSON(b, key, r)
}

// Runtimes lists every runtime the agents report, by node then module.
func (v *View) Runtimes() ([]Runtime, error) { return decodeRows[Runtime](v.r, prefixRuntime) }

// RuntimesOf lists one node's runtimes, by module.
func (v *View) RuntimesOf(node string) ([]Runtime, error) {
	return decodeRows[Runtime](v.r, pairPrefix(prefixRuntime, node)...)
}

// Drift reads the last drift a node's agent found, if any.
func (v *View) Drift(node string) (Drift, bool, error) {
	return getOne[Drift](v.r, append([]byte{prefixDrift}, node...))
}

// Drifts reads every node's last drift, by node: few rows, read at once.
func (v *View) Drifts() (map[string]Drift, error) {
	out := map[string]Drift{}
	rows, err := scanRows(v.r, []byte{prefixDrift}, func(k, val []byte) (struct {
		node string
		d    Drift
	}, error) {
		var row struct {
			node string
			d    Drift
		}
		row.node = string(k[1:])
		err := json.Unmarshal(val, &row.d)
		return row, err
	})
	for _, r := range rows {
		out[r.node] = r.d
	}
	return out, err
}

// Holds says whether the drift still holds of a node that last applied
// the declaration of sequence applied: it was left as found, and nothing
// was applied since.
func (d Drift) Holds(applied uint64) bool { return !d.Corrected && d.Sequence >= applied }

// Facts are what a node's agent last detected of its machine.
type Facts struct {
	Facts        map[string]string `json:"facts"`
	Capabilities []string          `json:"capabilities"`
	At           time.Time         `json:"at"`
}

// AllFacts reads every node's facts, by node.
func (v *View) AllFacts() (map[string]Facts, error) {
	out := map[string]Facts{}
	type row struct {
		node string
		f    Facts
	}
	rows, err := scanRows(v.r, []byte{prefixFacts}, func(k, val []byte) (row, error) {
		r := row{node: string(k[1:])}
		return r, json.Unmarshal(val, &r.f)
	})
	for _, r := range rows {
		out[r.node] = r.f
	}
	return out, err
}

// NodeFacts reads one node's facts, if its agent reported any.
func (v *View) NodeFacts(node string) (Facts, bool, error) {
	return getOne[Facts](v.r, append([]byte{prefixFacts}, node...))
}
