package projections

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/cockroachdb/pebble/v2"
	"github.com/meshctl/mesh/events"
)

// Foreign messages (rule 19): what arrived on the stream and is not its
// rightful writer's event. Each is kept here, by stream sequence, with why,
// and never folded into any other read model: one message from a stray
// writer can neither change what the mesh believes nor stop the fold.
// Until the operator acknowledges it (ForeignAcknowledged), status is not
// well; after, it stays listed, and audit names it for ever.

func foreignKey(seq uint64) []byte { return binary.BigEndian.AppendUint64([]byte{prefixForeign}, seq) }
func openForeignKey(seq uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{prefixForeignOpen}, seq)
}
func reportKeyKey(node string) []byte { return append([]byte{prefixReportKey}, node...) }

// putForeign records rec as foreign, open.
func putForeign(b *pebble.Batch, rec events.Recorded) error {
	row := ForeignMessage{Seq: rec.Seq, Subject: rec.Subject, Writer: rec.Signer, Reason: reasonOf(rec.Foreign), Stored: rec.Stored}
	s, _ := events.ParseSubject(rec.Subject)
	if n := s.Touches(); n != "" && events.ValidateName("node", n) == nil {
		row.Nodes = append(row.Nodes, n)
	}
	if rec.Event != nil {
		row.Type = rec.Event.EventType()
		if r, ok := events.Rights[row.Type]; ok {
			if n := r.Name(rec.Event); n != "" && n != s.Touches() && events.ValidateName("node", n) == nil && r.Kind != events.KindModule {
				row.Nodes = append(row.Nodes, n)
			}
		}
	}
	slices.Sort(row.Nodes)
	row.Nodes = slices.Compact(row.Nodes)
	if err := putJSON(b, foreignKey(rec.Seq), row); err != nil {
		return err
	}
	return b.Set(openForeignKey(rec.Seq), nil, nil)
}

func reasonOf(err error) string {
	var fe *events.ForeignError
	if errors.As(err, &fe) {
		return fe.Reason
	}
	return err.Error()
}

// foldForeign marks acknowledged foreign messages and floods. Acknowledging
// one that is neither, or is already acknowledged, changes nothing: the
// controller refuses such a command, and a replay must fold the same.
func foldForeign(b *pebble.Batch, rec events.Recorded) error {
	ack, ok := rec.Event.(events.ForeignAcknowledged)
	if !ok {
		return nil
	}
	seqs := ack.Seqs
	if ack.To > 0 {
		// A range marks what is open in it now: every message it covers
		// was folded before it, so a replay finds the same ones.
		open, err := openForeignIn(b, ack.From, ack.To)
		if err != nil {
			return err
		}
		seqs = append(slices.Clone(seqs), open...)
	}
	for _, seq := range seqs {
		var row ForeignMessage
		found, err := getJSON(b, foreignKey(seq), &row)
		if err != nil {
			return err
		}
		if !found || row.Acked != 0 {
			continue
		}
		row.Acked = rec.Seq
		if err := putJSON(b, foreignKey(seq), row); err != nil {
			return err
		}
		if err := b.Delete(openForeignKey(seq), nil); err != nil {
			return err
		}
	}
	return ackFloods(b, ack, rec.Seq)
}

// openForeignIn answers the foreign messages from..to (both included) not
// acknowledged.
func openForeignIn(r pebble.Reader, from, to uint64) ([]uint64, error) {
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: openForeignKey(from), UpperBound: openForeignKey(to + 1)})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var out []uint64
	for it.First(); it.Valid(); it.Next() {
		out = append(out, binary.BigEndian.Uint64(it.Key()[1:]))
	}
	return out, it.Error()
}

// reportKey is the key node's reports are signed with now ("" for none).
func (f *folder) reportKey(node string) (string, error) {
	if k, ok := f.reportKeys[node]; ok {
		return k, nil
	}
	v, closer, err := f.b.Get(reportKeyKey(node))
	if errors.Is(err, pebble.ErrNotFound) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	defer closer.Close()
	f.reportKeys[node] = string(v)
	return string(v), nil
}

// foldReportKeys keeps each node's report key in force.
func (f *folder) foldReportKeys(rec events.Recorded) error {
	if rk, ok := rec.Event.(events.ReportKeyRecorded); ok {
		f.reportKeys[rk.Node] = rk.Key
		return f.b.Set(reportKeyKey(rk.Node), []byte(rk.Key), nil)
	}
	return nil
}

// Foreign lists every foreign message, by stream sequence.
func (v *View) Foreign() ([]ForeignMessage, error) {
	return decodeRows[ForeignMessage](v.r, prefixForeign)
}

// ForeignAt reads the foreign message at stream sequence seq, if the
// message there was set aside.
func (v *View) ForeignAt(seq uint64) (ForeignMessage, bool, error) {
	return getOne[ForeignMessage](v.r, foreignKey(seq))
}

// OpenForeign answers how many foreign messages are not acknowledged, and
// the first of them.
func (v *View) OpenForeign() (int, *ForeignMessage, error) {
	seqs, err := keysUnder(v.r, []byte{prefixForeignOpen})
	if err != nil || len(seqs) == 0 {
		return 0, nil, err
	}
	var first ForeignMessage
	if _, err := getJSON(v.r, foreignKey(binary.BigEndian.Uint64([]byte(seqs[0]))), &first); err != nil {
		return 0, nil, fmt.Errorf("projections: cannot read foreign message: %w", err)
	}
	return len(seqs), &first, nil
}

// ReportKey is the key node's reports are signed with now ("" for none).
func (v *View) ReportKey(node string) (string, error) {
	raw, found, err := getRaw(v.r, reportKeyKey(node))
	if err != nil || !found {
		return "", err
	}
	return string(raw), nil
}
