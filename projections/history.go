package projections

import (
	"encoding/binary"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/meshctl/mesh/events"
)

// The history index: for each node, the stream sequence of every
// declaration it was sent and every report it sent back, in order, with the
// time, so that history and audit read exactly those events by sequence
// (direct gets) instead of replaying the stream. Key: node, sep, seq (8
// bytes big endian); value: kind (1 byte) and unix nanoseconds (8 bytes).
const (
	HistoryDeclaration byte = 'd'
	HistoryReport      byte = 'r'
)

// HistoryEntry is one indexed event of a node.
type HistoryEntry struct {
	Seq  uint64
	Kind byte
	At   time.Time
}

func historyKey(node string, seq uint64) []byte {
	return binary.BigEndian.AppendUint64(pairPrefix(prefixHistory, node), seq)
}

func foldHistory(b *pebble.Batch, rec events.Recorded) error {
	var node string
	kind := HistoryReport
	switch ev := rec.Event.(type) {
	case events.DeclarationSent:
		node, kind = ev.Node, HistoryDeclaration
	case events.DeclarationApplied:
		node = ev.Node
	case events.DeclarationFailed:
		node = ev.Node
	case events.DeclarationRefused:
		node = ev.Node
	default:
		return nil
	}
	v := binary.BigEndian.AppendUint64([]byte{kind}, uint64(rec.Envelope.OccurredAt.UnixNano()))
	return b.Set(historyKey(node, rec.Seq), v, nil)
}

// History lists node's indexed events between since and until (zero: open).
func (v *View) History(node string, since, until time.Time) ([]HistoryEntry, error) {
	prefix := pairPrefix(prefixHistory, node)
	lo, hi := prefixBounds(prefix...)
	it, err := v.r.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var out []HistoryEntry
	for it.First(); it.Valid(); it.Next() {
		k, val := it.Key(), it.Value()
		if len(k) != len(prefix)+8 || len(val) != 9 {
			return nil, errCorruptRow
		}
		e := HistoryEntry{Seq: binary.BigEndian.Uint64(k[len(prefix):]), Kind: val[0],
			At: time.Unix(0, int64(binary.BigEndian.Uint64(val[1:]))).UTC()}
		if !since.IsZero() && e.At.Before(since) || !until.IsZero() && e.At.After(until) {
			continue
		}
		out = append(out, e)
	}
	return out, it.Error()
}
