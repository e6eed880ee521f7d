package world

import (
	"strings"
	"time"

	"github.com/meshctl/mesh/projections"
	"github.com/meshctl/mesh/verdict"
	"github.com/meshctl/mesh/wire"
)

// StateOf is the node's state in row, from what it would be sent now
// (verdict.StateOf decides).
func (w Would) StateOf(n projections.Node) (wire.State, time.Time, string) {
	return verdict.StateOf(n.EnrolledAt, n.LastSent, n.LastReport, w.Would)
}

// Drifted is state, or drifted when a current node's last drift still holds.
func Drifted(state wire.State, detail string, n projections.Node, drifts map[string]projections.Drift) (wire.State, string) {
	d, ok := drifts[n.Name]
	if state != wire.StateCurrent || !ok || n.LastReport == nil || !d.Holds(n.LastReport.Sequence) {
		return state, detail
	}
	return wire.StateDrifted, "changed behind its agent's back: " + strings.Join(d.Paths, ", ")
}
