package projections

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/meshctl/mesh/declaration"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/projections/rows"
)

// The history index: for each node, every declaration it was sent and every
// report it sent back, in stream order, with what history shows of each.
// History is answered from these rows alone. Reading the events back by
// sequence instead cost a load of the bus's whole file store: a node's
// events lie spread over the stream, and the file store reads a block of
// 8 MiB to answer one message, so the first history of a node with a
// thousand declarations in a million-event stream took 0.3 to 0.9 s.
// Only history --diff (the contents) and audit (the signatures) read the
// log, and each read is checked against its row.
//
// The key is node, sep, seq (8 bytes big endian); the value is a
// rows.HistoryEntry in its binary codec (rows/history.go).

// HistoryEntry is one indexed event of a node: what history shows of it.
type HistoryEntry = rows.HistoryEntry

// The kinds of a history row.
const (
	HistoryDeclaration = rows.HistoryDeclaration
	HistoryApplied     = rows.HistoryApplied
	HistoryFailed      = rows.HistoryFailed
	HistoryRefused     = rows.HistoryRefused
	HistoryDrift       = rows.HistoryDrift
	HistoryInterrupted = rows.HistoryInterrupted
	HistoryUnreachable = rows.HistoryUnreachable
	HistoryReachable   = rows.HistoryReachable
)

func historyKey(node string, seq uint64) []byte { return appendHistoryKey(nil, node, seq) }

func appendHistoryKey(dst []byte, node string, seq uint64) []byte {
	return binary.BigEndian.AppendUint64(append(append(append(dst, prefixHistory), node...), sep), seq)
}

func (f *folder) foldHistory(rec events.Recorded) error {
	var node string
	e := HistoryEntry{At: rec.Envelope.OccurredAt}
	switch ev := rec.Event.(type) {
	case events.DeclarationSent:
		node, e.Kind, e.Sequence, e.Digest = ev.Node, HistoryDeclaration, ev.Sequence, ev.Digest
		e.ContentDigest, e.By, e.Resources = ev.ContentDigest, ev.By, ev.Resources
		e.Operator = rec.Envelope.By
		// A declaration that does not decode is the log's to keep and
		// audit's to name; the row says its builds are unknown.
		if f.head != nil && f.head.Node != "" {
			e.Builds = f.head.Modules
		} else {
			e.Builds, _ = declaration.Builds(ev.Declaration)
		}
	case events.DeclarationApplied:
		node, e.Kind, e.Sequence, e.Digest, e.Changed = ev.Node, HistoryApplied, ev.Sequence, ev.Digest, ev.Changed
	case events.DeclarationFailed:
		node, e.Kind, e.Sequence, e.Digest, e.Failed = ev.Node, HistoryFailed, ev.Sequence, ev.Digest, ev.Failed
	case events.DeclarationRefused:
		node, e.Kind, e.Sequence, e.Digest, e.Reason, e.Highest = ev.Node, HistoryRefused, ev.Sequence, ev.Digest, ev.Reason, ev.Highest
	case events.DriftFound:
		node, e.Kind, e.Sequence, e.Paths, e.Corrected = ev.Node, HistoryDrift, ev.Sequence, ev.Paths, ev.Corrected
	case events.ApplyInterrupted:
		node, e.Kind, e.Sequence, e.Digest, e.BeganAt = ev.Node, HistoryInterrupted, ev.Sequence, ev.Digest, ev.BeganAt
	case events.NodeUnreachable:
		node, e.Kind, e.LastHeard, e.Bound = ev.Node, HistoryUnreachable, ev.LastHeard, ev.Bound
	case events.NodeReachable:
		node, e.Kind = ev.Node, HistoryReachable
	default:
		return nil
	}
	// Into the folder's buffers: the batch copies key and row.
	f.key = appendHistoryKey(f.key[:0], node, rec.Seq)
	f.row = rows.AppendHistory(f.row[:0], e)
	return f.b.Set(f.key, f.row, nil)
}

// HistoryPending is History's answer while the history index of the
// events up to Through is still being fetched (published.go).
type HistoryPending struct{ Through uint64 }

func (p *HistoryPending) Error() string {
	return fmt.Sprintf("the history index of events 1 to %d is still being fetched from the snapshot on the bus this controller started from; ask again shortly (the controller's log says when it is whole)", p.Through)
}

// History lists node's indexed events between since and until (zero: open).
func (v *View) History(node string, since, until time.Time) ([]HistoryEntry, error) {
	if from := readU64(v.r, keyHistoryFrom); from > 0 {
		return nil, &HistoryPending{Through: from}
	}
	prefix := pairPrefix(prefixHistory, node)
	lo, hi := prefixBounds(prefix...)
	it, err := v.r.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var out []HistoryEntry
	for it.First(); it.Valid(); it.Next() {
		k := it.Key()
		if len(k) != len(prefix)+8 {
			return nil, rows.ErrCorrupt
		}
		e, err := rows.DecodeHistory(binary.BigEndian.Uint64(k[len(prefix):]), it.Value())
		if err != nil {
			return nil, err
		}
		if !since.IsZero() && e.At.Before(since) || !until.IsZero() && e.At.After(until) {
			continue
		}
		out = append(out, e)
	}
	return out, it.Error()
}
