package reconcile

import (
	"testing"

	"github.com/meshctl/mesh/commands/world"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/manifest"
	"github.com/meshctl/mesh/projections"
	"github.com/meshctl/mesh/verdict"
	"github.com/meshctl/mesh/wire"
)

// Rule 27 node by node: given what a node was sent, said and would be
// sent, and what holds it, what the reconciler does.
func TestJudge(t *testing.T) {
	would := world.Would{Would: verdict.Would{Composable: true, ContentDigest: "new"}}
	sent := func(content, by string) *wire.Sent {
		return &wire.Sent{Sequence: 3, Digest: "d-" + content, ContentDigest: content, By: by}
	}
	said := func(o events.Outcome, content string) *wire.Report {
		return &wire.Report{Outcome: o, Sequence: 3, Digest: "d-" + content}
	}
	row := func(s *wire.Sent, r *wire.Report) projections.Node {
		return projections.Node{Name: "web-1", LastSent: s, LastReport: r}
	}
	behind := row(sent("old", "push"), said(events.OutcomeApplied, "old"))
	current := row(sent("new", "push"), said(events.OutcomeApplied, "new"))
	for name, c := range map[string]struct {
		n    node
		want verdictOf
	}{
		"never sent":                  {node{row: row(nil, nil), would: would, mode: manifest.ReconcileBehind}, send},
		"behind":                      {node{row: behind, would: would, mode: manifest.ReconcileBehind}, send},
		"current":                     {node{row: current, would: would, mode: manifest.ReconcileAlways}, nothing},
		"waiting on what it would be": {node{row: row(sent("new", "push"), nil), would: would, mode: manifest.ReconcileBehind}, nothing},
		"retired":                     {node{row: projections.Node{Name: "web-1", Retired: true}, would: would, mode: manifest.ReconcileBehind}, nothing},
		"cannot be composed":          {node{row: behind, would: world.Would{}, mode: manifest.ReconcileBehind}, nothing},
		"held by hand":                {node{row: row(sent("hand", events.ByHand), said(events.OutcomeApplied, "hand")), would: would, mode: manifest.ReconcileAlways}, leave},
		"in a rollout":                {node{row: behind, would: would, mode: manifest.ReconcileBehind, rollout: "r-1"}, leave},
		"a module says never":         {node{row: behind, would: would, mode: manifest.ReconcileNever, modeOf: "db"}, leave},
		"unreachable":                 {node{row: behind, would: would, mode: manifest.ReconcileBehind, unreachable: true}, leave},
		"refused what it would be":    {node{row: row(sent("new", events.ByReconciler), said(events.OutcomeRefused, "new")), would: would, mode: manifest.ReconcileAlways}, leave},
		"failed what it would be":     {node{row: row(sent("new", events.ByReconciler), said(events.OutcomeFailed, "new")), would: would, mode: manifest.ReconcileAlways}, leave},
		"refused, then a change":      {node{row: row(sent("old", events.ByReconciler), said(events.OutcomeRefused, "old")), would: would, mode: manifest.ReconcileBehind}, send},
		"drifted under always":        {node{row: current, would: would, mode: manifest.ReconcileAlways, drifted: true}, send},
		"drifted under behind":        {node{row: current, would: would, mode: manifest.ReconcileBehind, drifted: true}, leave},
		"drifted, one module never":   {node{row: current, would: would, mode: manifest.ReconcileNever, drifted: true}, leave},
	} {
		if got, why := judge(c.n); got != c.want || (got == leave) != (why != "") {
			t.Errorf("%s: judged %d (%q); want %d", name, got, why, c.want)
		}
	}
}

// The weakest mode among a node's modules is the one that counts.
func TestWeaker(t *testing.T) {
	if !weaker(manifest.ReconcileNever, manifest.ReconcileBehind) || !weaker(manifest.ReconcileBehind, manifest.ReconcileAlways) ||
		weaker(manifest.ReconcileAlways, manifest.ReconcileNever) {
		t.Fatal("never < behind < always does not hold")
	}
}
