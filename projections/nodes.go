package projections

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/meshctl/mesh/events"
)

// Node is the nodes read model's row: what the mesh knows of one machine.
type Node struct {
	Name         string            `json:"name"`
	Capabilities []string          `json:"capabilities"`
	Labels       map[string]string `json:"labels"`
	Retired      bool              `json:"retired"`
	EnrolledAt   time.Time         `json:"enrolled_at"`
	RetiredAt    time.Time         `json:"retired_at,omitzero"`
	// EnrolledSeq is the stream sequence of the enrolment; Version that of the
	// node aggregate's last event folded.
	EnrolledSeq uint64 `json:"enrolled_seq"`
	Version     uint64 `json:"version"`
}

// foldNode applies one node event to the nodes read model inside b.
func foldNode(b *pebble.Batch, rec events.Recorded) error {
	switch ev := rec.Event.(type) {
	case events.NodeEnrolled:
		n := Node{
			Name: ev.Name, Capabilities: ev.Capabilities, Labels: ev.Labels,
			EnrolledAt: rec.Envelope.OccurredAt, EnrolledSeq: rec.Seq, Version: rec.Seq,
		}
		return putJSON(b, nodeKey(ev.Name), n)
	case events.NodeRetired:
		var n Node
		found, err := getJSON(b, nodeKey(ev.Name), &n)
		if err != nil {
			return err
		}
		if !found {
			return fmt.Errorf("projections: event %d retires node %s, which was never enrolled", rec.Seq, ev.Name)
		}
		n.Retired, n.RetiredAt, n.Version = true, rec.Envelope.OccurredAt, rec.Seq
		return putJSON(b, nodeKey(ev.Name), n)
	case events.ModuleAssigned, events.ModuleUnassigned:
		// Any event of the node's aggregate moves its version.
		name := rec.Envelope.Aggregate.ID
		var n Node
		found, err := getJSON(b, nodeKey(name), &n)
		if err != nil || !found {
			return err
		}
		n.Version = rec.Seq
		return putJSON(b, nodeKey(name), n)
	}
	return nil
}

func putJSON(b *pebble.Batch, key []byte, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return b.Set(key, data, nil)
}

func getJSON(r pebble.Reader, key []byte, v any) (bool, error) {
	data, closer, err := r.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer closer.Close()
	return true, json.Unmarshal(data, v)
}
