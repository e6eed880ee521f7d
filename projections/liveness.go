package projections

import (
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/meshctl/mesh/events"
)

// Liveness is a node's last recorded liveness change (issue 28): a row
// only for nodes that were once unreachable, since only the changes are
// events. Version is the liveness aggregate's last event, which the next
// change expects.
type Liveness struct {
	Node        string        `json:"node"`
	Unreachable bool          `json:"unreachable"`
	LastHeard   time.Time     `json:"last_heard"` // when lost: the last time it was heard
	Bound       time.Duration `json:"bound"`      // when lost: the silence it outlasted
	Since       time.Time     `json:"since"`      // when the change was recorded
	Version     uint64        `json:"version"`
}

func livenessKey(node string) []byte { return append([]byte{prefixLiveness}, node...) }

// foldLiveness keeps each node's newest liveness change.
func foldLiveness(b *pebble.Batch, rec events.Recorded) error {
	at := rec.Envelope.OccurredAt
	switch ev := rec.Event.(type) {
	case events.NodeUnreachable:
		return putJSON(b, livenessKey(ev.Node), Liveness{Node: ev.Node, Unreachable: true, LastHeard: ev.LastHeard, Bound: ev.Bound, Since: at, Version: rec.Seq})
	case events.NodeReachable:
		return putJSON(b, livenessKey(ev.Node), Liveness{Node: ev.Node, LastHeard: ev.Heard, Since: at, Version: rec.Seq})
	}
	return nil
}

// Liveness lists every node with a liveness row, by name.
func (v *View) Liveness() (map[string]Liveness, error) {
	rows, err := decodeRows[Liveness](v.r, prefixLiveness)
	out := make(map[string]Liveness, len(rows))
	for _, r := range rows {
		out[r.Node] = r
	}
	return out, err
}

// NodeLiveness reads one node's liveness row; a node never lost has none,
// and its zero row says it is reachable at version 0.
func (v *View) NodeLiveness(node string) (Liveness, error) {
	var l Liveness
	_, err := getJSON(v.r, livenessKey(node), &l)
	return l, err
}

// ReportKeyNodes is the set of nodes whose agent recorded a report key: the
// nodes that ever said anything, whose silence can mean they are lost.
func (v *View) ReportKeyNodes() (map[string]bool, error) {
	names, err := scanRows(v.r, []byte{prefixReportKey}, func(k, _ []byte) (string, error) { return string(k[1:]), nil })
	out := make(map[string]bool, len(names))
	for _, n := range names {
		out[n] = true
	}
	return out, err
}
