package rollout

import (
	"context"
	"fmt"
	"testing"

	"github.com/meshctl/mesh/commands/core/coretest"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/manifest"
	"github.com/meshctl/mesh/projections"
	"github.com/meshctl/mesh/wire"
)

// A node assigned under policy auto to a build older than its module's
// newest, after a drive found nothing waiting, is one node's move: the
// drive reads that node's assignments alone (autoCandidates; the test
// checks the moves it reads are that node's) and must still start the
// newest build's rollout for it. Fails when the moved nodes' rows are not
// read.
func TestAnAutoNodeAssignedAfterALookStartsItsRollout(t *testing.T) {
	ctx := context.Background()
	m := coretest.New(t, true)
	build := func(i int) manifest.Manifest {
		b, err := manifest.Parse(fmt.Appendf(nil, `{"module":"app","resources":[{"kind":"file","path":"/etc/app","mode":"0644","content":"%d\n"}]}`, i))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	old, newest := build(1), build(2)
	for _, b := range []manifest.Manifest{old, newest} {
		m.Publish(events.ModuleAggregate("app"), events.ModuleRegistered{Module: "app", Build: b.Build(), Manifest: b.Canonical()})
	}
	assign := func(node string, p events.Policy) {
		m.Publish(events.NodeAggregate(node), events.NodeEnrolled{Name: node, Capabilities: []string{}, Labels: map[string]string{}})
		m.Publish(events.NodeAggregate(node), events.ModuleAssigned{Node: node, Module: "app", Build: old.Build(), Settings: map[string]string{}, Policy: p})
		m.Report(node, events.ReportKeyRecorded{Node: node, Key: m.Agent.PublicKey()})
	}
	// Manual nodes on the older build wait for no rollout.
	for i := range 3 {
		assign(fmt.Sprintf("manual-%d", i), events.PolicyManual)
	}
	h := over(m.Fold())
	if err := h.DriveRollouts(ctx); err != nil {
		t.Fatal(err)
	}
	seen := h.autoSeen.Load()
	if list, err := h.ListRollouts(ctx, wire.Empty{}); err != nil || len(list.Rollouts) != 0 || seen == 0 {
		t.Fatalf("with no auto node: rollouts %+v (%v), the look at version %d", list.Rollouts, err, seen)
	}

	assign("auto-1", events.PolicyAuto)
	m.CaughtUp()
	// The case under test: the moves since the look are one node's.
	if err := h.Proj.Read(func(v *projections.View) error {
		if moved, ok := v.MovedBetween(seen, v.CompositionVersion()); !ok || len(moved) != 1 || !moved["auto-1"] {
			return fmt.Errorf("the moves since the look: %v (known %v), want auto-1 alone", moved, ok)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := h.DriveRollouts(ctx); err != nil {
		t.Fatal(err)
	}
	list, err := h.ListRollouts(ctx, wire.Empty{})
	if err != nil || len(list.Rollouts) != 1 {
		t.Fatalf("after an auto node was assigned the older build: rollouts %+v (%v), want the newest build's", list.Rollouts, err)
	}
	ro := list.Rollouts[0]
	if !ro.Auto || ro.Build != newest.Build() || !onlyNode(ro.Waves, "auto-1") {
		t.Fatalf("the rollout the auto node started: %+v", ro)
	}
}

// onlyNode says whether waves name node and no other.
func onlyNode(waves []events.RolloutWave, node string) bool {
	var all []string
	for _, w := range waves {
		all = append(all, w.Nodes...)
	}
	return len(all) == 1 && all[0] == node
}
