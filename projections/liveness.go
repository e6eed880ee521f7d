package projections

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/cockroachdb/pebble/v2"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/projections/rows"
)

// Liveness is a node's last recorded liveness change (rows.Liveness: its
// binary codec is there).
type Liveness = rows.Liveness

func livenessKey(node string) []byte { return append([]byte{prefixLiveness}, node...) }

// foldLiveness keeps each node's newest liveness change.
func foldLiveness(b *pebble.Batch, rec events.Recorded) error {
	at := rec.Envelope.OccurredAt
	switch ev := rec.Event.(type) {
	case events.NodeUnreachable:
		return b.Set(livenessKey(ev.Node), rows.EncodeLiveness(Liveness{Unreachable: true, LastHeard: ev.LastHeard, Bound: ev.Bound, Since: at, Version: rec.Seq}), nil)
	case events.NodeReachable:
		return b.Set(livenessKey(ev.Node), rows.EncodeLiveness(Liveness{LastHeard: ev.Heard, Since: at, Version: rec.Seq}), nil)
	}
	return nil
}

// Liveness lists every node with a liveness row, in their names' order.
func (v *View) Liveness() (Lives, error) {
	return scanRows(v.r, []byte{prefixLiveness}, func(k, val []byte) (Liveness, error) {
		return rows.DecodeLiveness(string(k[1:]), val)
	})
}

// Lives is every liveness row, in their nodes' names' order (their keys'):
// a slice, not a map by name, since status reads one for every node it
// answers, and with 100,000 nodes lost the map's building and its lookups
// were a tenth of a status.
type Lives []Liveness

// Of is node's row; a node never lost has none, and its zero row says it
// is reachable at version 0.
func (l Lives) Of(node string) Liveness {
	if i, found := slices.BinarySearchFunc(l, node, func(r Liveness, n string) int { return strings.Compare(r.Node, n) }); found {
		return l[i]
	}
	return Liveness{}
}

// LivesWalk reads the rows of nodes asked for in their names' order (as
// View.EachNode gives them) with a step forward each, not a search.
type LivesWalk struct {
	l    Lives
	i    int
	last string
}

// Walk is a walk over l from its first row.
func (l Lives) Walk() *LivesWalk { return &LivesWalk{l: l} }

// Of is node's row (Lives.Of). A node before the last asked for is
// searched for: the answer never depends on the order, only its cost.
func (w *LivesWalk) Of(node string) Liveness {
	if node < w.last {
		return w.l.Of(node)
	}
	w.last = node
	for w.i < len(w.l) && w.l[w.i].Node < node {
		w.i++
	}
	if w.i < len(w.l) && w.l[w.i].Node == node {
		return w.l[w.i]
	}
	return Liveness{}
}

// NodeLiveness reads one node's liveness row; a node never lost has none,
// and its zero row says it is reachable at version 0.
func (v *View) NodeLiveness(node string) (Liveness, error) {
	l, _, err := getLiveness(v.r, node)
	return l, err
}

// getLiveness reads node's row from r; none is the zero row (as Lives.Of
// answers), not found.
func getLiveness(r pebble.Reader, node string) (Liveness, bool, error) {
	raw, closer, err := r.Get(livenessKey(node))
	if errors.Is(err, pebble.ErrNotFound) {
		return Liveness{}, false, nil
	}
	if err != nil {
		return Liveness{}, false, err
	}
	defer closer.Close()
	l, err := rows.DecodeLiveness(node, raw)
	if err != nil {
		return Liveness{}, false, fmt.Errorf("projections: the liveness row of %s is corrupt: %w", node, err)
	}
	return l, true, nil
}

// bumpLiveness moves the version of node's row, if it has one
// (followVersion): the next change expects it.
func bumpLiveness(b *pebble.Batch, node string, seq uint64) error {
	l, found, err := getLiveness(b, node)
	if err != nil || !found {
		return err
	}
	l.Version = seq
	return b.Set(livenessKey(node), rows.EncodeLiveness(l), nil)
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
