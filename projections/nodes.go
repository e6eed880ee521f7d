package projections

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/cockroachdb/pebble/v2"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/projections/rows"
)

// Node is the nodes read model's row (rows.Node: its binary codec is there).
type Node = rows.Node

// foldNode applies one node event to the nodes read model.
func (f *folder) foldNode(rec events.Recorded) error {
	switch ev := rec.Event.(type) {
	case events.NodeEnrolled:
		n := Node{
			Name: ev.Name, Capabilities: ev.Capabilities, Labels: ev.Labels,
			EnrolledAt: rec.Envelope.OccurredAt, EnrolledSeq: rec.Seq, Version: rec.Seq,
		}
		return f.putNode(n)
	case events.NodeRetired:
		return f.updateNode(ev.Name, func(n *Node) { n.Retired, n.RetiredAt, n.Version = true, rec.Envelope.OccurredAt, rec.Seq })
	case events.NodeChanged:
		return f.updateNode(ev.Name, func(n *Node) { n.Capabilities, n.Labels, n.Version = ev.Capabilities, ev.Labels, rec.Seq })
	case events.NodeFactsReported:
		return putJSON(f.b, append([]byte{prefixFacts}, ev.Node...), Facts{Facts: ev.Facts, Capabilities: ev.Capabilities, At: rec.Envelope.OccurredAt})
	case events.ModuleAssigned, events.ModuleUnassigned, events.SecretForgotten:
		// Any event of the node's aggregate moves its version: a row behind
		// it would make every append to the node conflict for good.
		return f.updateNode(rec.Envelope.Aggregate.ID, func(n *Node) { n.Version = rec.Seq })
	case events.DeclarationSent:
		var wasHeld bool
		err := f.updateNode(ev.Node, func(n *Node) {
			wasHeld = n.LastSent != nil && n.LastSent.By == events.ByHand
			n.Version = rec.Seq
			n.LastSent = &Sent{Sequence: ev.Sequence, Digest: ev.Digest, ContentDigest: ev.ContentDigest, By: ev.By, Operator: rec.Envelope.By,
				Resources: ev.Resources, At: rec.Envelope.OccurredAt, StreamSeq: rec.Seq}
		})
		// The index of held nodes moves only when a hand declaration
		// begins or ends a hold: an ordinary send writes nothing more.
		switch {
		case err != nil:
			return err
		case ev.By == events.ByHand:
			return f.b.Set(handHeldKey(ev.Node), nil, nil)
		case wasHeld:
			return f.b.Delete(handHeldKey(ev.Node), nil)
		}
		return nil
	case events.DeclarationApplied:
		return f.report(ev.Node, Report{Outcome: events.OutcomeApplied, Sequence: ev.Sequence, Digest: ev.Digest}, rec)
	case events.DeclarationFailed:
		return f.report(ev.Node, Report{Outcome: events.OutcomeFailed, Sequence: ev.Sequence, Digest: ev.Digest, Failed: ev.Failed}, rec)
	case events.DeclarationRefused:
		return f.report(ev.Node, Report{Outcome: events.OutcomeRefused, Sequence: ev.Sequence, Digest: ev.Digest, Reason: ev.Reason, Highest: ev.Highest}, rec)
	}
	return nil
}

// report records a node's newest report on what it was last sent. A report
// on anything else (a forged declaration its agent refused, a replay, a
// late report on an older send) is kept in the history index and does not
// displace it: it says nothing of whether the node is what it was told, and
// a stranger's message on the node's subject must not change its state.
func (f *folder) report(node string, r Report, rec events.Recorded) error {
	r.At, r.StreamSeq = rec.Envelope.OccurredAt, rec.Seq
	n, found, err := f.node(node)
	if err != nil || !found || n.LastSent == nil || r.Digest != n.LastSent.Digest {
		return err
	}
	if r.Outcome != events.OutcomeApplied {
		r.FailingSince = r.At
		if p := n.LastReport; p != nil && p.Outcome == r.Outcome && sameFailure(*p, r) && !p.FailingSince.IsZero() {
			r.FailingSince = p.FailingSince
		}
	}
	n.LastReport = &r
	return f.putNode(n)
}

// updateNode changes a node's row. admit has checked the node exists.
func (f *folder) updateNode(name string, change func(*Node)) error {
	n, found, err := f.node(name)
	if err != nil || !found {
		return err
	}
	change(&n)
	return f.putNode(n)
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

// getOne reads the JSON row at key: a view's getter of one row.
func getOne[T any](r pebble.Reader, key []byte) (T, bool, error) {
	var row T
	found, err := getJSON(r, key, &row)
	return row, found, err
}

// sameFailure reports whether two failing reports fail the same way: the
// same reason, or the same resources failing for the same reasons.
func sameFailure(a, b Report) bool {
	if a.Reason != b.Reason || len(a.Failed) != len(b.Failed) {
		return false
	}
	for i := range a.Failed {
		if a.Failed[i] != b.Failed[i] {
			return false
		}
	}
	return true
}

// putNode writes a node's row into the batch and answers a copy of the
// row at its size, which the folder remembers. It is encoded into a pooled
// buffer (the batch copies what it is given, and a row allocated per
// event was most of a fold's own garbage) and copied once: a row grown by
// appending holds up to twice its size, for as long as it is remembered.
func putNode(b *pebble.Batch, n Node) ([]byte, error) {
	buf := rowBuffers.Get().(*[]byte)
	// The key (nodeKey) and then the row, in the one buffer.
	*buf = append(append((*buf)[:0], prefixNode), n.Name...)
	k := len(*buf)
	*buf = rows.AppendNode(*buf, n)
	err := b.Set((*buf)[:k], (*buf)[k:], nil)
	row := bytes.Clone((*buf)[k:])
	rowBuffers.Put(buf)
	return row, err
}

var rowBuffers = sync.Pool{New: func() any { return new([]byte) }}

// getRow reads a node's encoded row, copied out of Pebble.
func getRow(rd pebble.Reader, name string) ([]byte, bool, error) {
	v, closer, err := rd.Get(nodeKey(name))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	defer closer.Close()
	return bytes.Clone(v), true, nil
}

func getNode(rd pebble.Reader, name string) (Node, bool, error) {
	v, closer, err := rd.Get(nodeKey(name))
	if errors.Is(err, pebble.ErrNotFound) {
		return Node{}, false, nil
	}
	if err != nil {
		return Node{}, false, err
	}
	defer closer.Close()
	n, err := decodeNode(name, v)
	return n, err == nil, err
}

// decodeNode decodes name's row, naming the node when it is corrupt.
func decodeNode(name string, row []byte) (Node, error) {
	n, err := rows.DecodeNode(row)
	if err != nil {
		return Node{}, fmt.Errorf("%w: %s", err, name)
	}
	return n, nil
}

// nodeRows decodes every node row; brief as rows.DecodeNodeAs.
// handHeldKey is a node's entry in the index of the nodes a hand
// declaration holds: every push that does not name them names them, and a
// push naming a few nodes finds them here rather than in every node's row.
func handHeldKey(node string) []byte { return append([]byte{prefixHandHeld}, node...) }

func nodeRows(rd pebble.Reader, brief bool) ([]Node, error) {
	return scanRows(rd, []byte{prefixNode}, func(_, v []byte) (Node, error) { return rows.DecodeNodeAs(v, brief) })
}
