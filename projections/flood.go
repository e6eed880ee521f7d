package projections

import (
	"encoding/binary"
	"slices"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/meshctl/mesh/events"
)

// Floods (issue 29): the nodes the controller cut for writing more on their
// report subjects than any agent does (NodeFlooded), by the stream sequence
// of the record. Status names each until the operator acknowledges it, as
// it names foreign messages, and the callout refuses the node until the
// record's Until: the refusal is read from the log, so it holds across a
// restart and in every controller of the stream.

// Flood is one flood's row.
type Flood struct {
	Seq     uint64    `json:"seq"`
	Node    string    `json:"node"`
	Reports int       `json:"reports"`
	Foreign int       `json:"foreign"`
	Bytes   int64     `json:"bytes"`
	From    time.Time `json:"from"`
	To      time.Time `json:"to"`
	Until   time.Time `json:"until"`
	Cut     bool      `json:"cut"`
	// Acked is the stream sequence of the acknowledgement, 0 while open.
	Acked uint64 `json:"acked,omitempty"`
}

func floodKey(seq uint64) []byte { return binary.BigEndian.AppendUint64([]byte{prefixFlood}, seq) }

func foldFloods(b *pebble.Batch, rec events.Recorded) error {
	ev, ok := rec.Event.(events.NodeFlooded)
	if !ok {
		return nil
	}
	return putJSON(b, floodKey(rec.Seq), Flood{Seq: rec.Seq, Node: ev.Node, Reports: ev.Reports, Foreign: ev.Foreign,
		Bytes: ev.Bytes, From: ev.From, To: ev.To, Until: ev.Until, Cut: ev.Cut})
}

// ackFloods marks the floods an acknowledgement names or covers.
func ackFloods(b *pebble.Batch, ack events.ForeignAcknowledged, at uint64) error {
	floods, err := decodeRows[Flood](b, prefixFlood)
	if err != nil {
		return err
	}
	for _, f := range floods {
		if f.Acked != 0 || !ack.Covers(f.Seq) {
			continue
		}
		f.Acked = at
		if err := putJSON(b, floodKey(f.Seq), f); err != nil {
			return err
		}
	}
	return nil
}

// Floods lists every flood recorded, by stream sequence.
func (v *View) Floods() ([]Flood, error) {
	return decodeRows[Flood](v.r, prefixFlood)
}

// OpenFloods lists the floods not acknowledged.
func (v *View) OpenFloods() ([]Flood, error) {
	all, err := v.Floods()
	return slices.DeleteFunc(all, func(f Flood) bool { return f.Acked != 0 }), err
}
