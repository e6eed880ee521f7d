package reconcile

import (
	"fmt"

	"github.com/meshctl/mesh/commands/world"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/manifest"
	"github.com/meshctl/mesh/projections"
	"github.com/meshctl/mesh/verdict"
	"github.com/meshctl/mesh/wire"
)

// node is what the reconciler weighs of one node, all read from one view
// of the read models (and the composition of its version or a newer one).
type node struct {
	row   projections.Node
	would world.Would
	// mode is the weakest reconcile mode among the modules assigned to
	// it (manifest.ReconcileBehind with none), and modeOf the module that
	// set it.
	mode, modeOf string
	// rollout is the id of a rollout neither finished nor aborted whose
	// waves hold the node, "" for none.
	rollout     string
	unreachable bool
	drifted     bool
}

// verdictOf is what the reconciler does with a node.
type verdictOf int

const (
	// nothing: the node is not behind (or cannot be composed, which no
	// send fixes and status names).
	nothing verdictOf = iota
	// send: the node is behind and every module of it lets the
	// reconciler send it.
	send
	// leave: the node is behind, or drifted, and is left to people;
	// the reason says why.
	leave
)

// judge decides one node (rule 27). It sends only what differs from what
// the node was last sent, or under always what its agent left drifted: a
// node that failed or refused a declaration is therefore never sent the
// same content again by the reconciler, which is its whole back-off, and
// cannot loop, since each send needs the composition to have moved (or a
// new drift report on the declaration just sent).
func judge(n node) (verdictOf, string) {
	row := n.row
	if row.Retired || !n.would.Composable && !verdict.HandHeld(row.LastSent) {
		return nothing, ""
	}
	behind := row.LastSent == nil || row.LastSent.ContentDigest != n.would.ContentDigest
	if !behind && !n.drifted {
		if rep := row.LastReport; rep != nil && row.LastSent != nil && rep.Digest == row.LastSent.Digest &&
			(rep.Outcome == events.OutcomeFailed || rep.Outcome == events.OutcomeRefused) {
			return leave, fmt.Sprintf("it %s what it would be sent; the reconciler does not send the same again (mesh push %s does)", rep.Outcome, row.Name)
		}
		return nothing, ""
	}
	switch {
	case verdict.HandHeld(row.LastSent):
		return leave, "held by its hand declaration (mesh push " + row.Name + " ends the hold)"
	case n.rollout != "":
		return leave, "in rollout " + n.rollout + ", which sends it"
	case n.mode == manifest.ReconcileNever:
		return leave, "module " + n.modeOf + " says reconcile never"
	case n.unreachable:
		return leave, "unreachable: sent once its agent is heard again"
	case behind:
		return send, ""
	case n.mode != manifest.ReconcileAlways:
		return leave, "drifted; module " + n.modeOf + " says reconcile behind, so only always sends a drifted node again"
	}
	return send, ""
}

// weaker says whether mode a allows the reconciler less than mode b.
func weaker(a, b string) bool { return rank[a] < rank[b] }

var rank = map[string]int{manifest.ReconcileNever: 0, manifest.ReconcileBehind: 1, manifest.ReconcileAlways: 2}

// driftedNode says whether row's node is drifted: current, with the last
// drift its agent left as found on what it applied (status's own test).
func driftedNode(row projections.Node, would world.Would, drifts map[string]projections.Drift) bool {
	state, _, _ := would.StateOf(row)
	state, _ = world.Drifted(state, "", row, drifts)
	return state == wire.StateDrifted
}
