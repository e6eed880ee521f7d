package aggregates

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/meshctl/mesh/events"
)

// Rule 23, one step of a wave: what is sent, moved, waited for, or halts.
// Each row fails when the decision changes.
func TestProgressWave(t *testing.T) {
	applied := func(n string) WaveNode {
		return WaveNode{Node: n, Moved: true, Sent: true, Answered: true, Outcome: events.OutcomeApplied}
	}
	inFlight := func(n string) WaveNode { return WaveNode{Node: n, Moved: true, Sent: true} }
	cases := []struct {
		name  string
		nodes []WaveNode
		limit int
		want  WaveProgress
	}{
		{"nothing moved yet: move up to the limit", []WaveNode{{Node: "a"}, {Node: "b"}, {Node: "c"}}, 2, WaveProgress{Move: []string{"a", "b"}}},
		{"moved, not sent: send before moving more", []WaveNode{{Node: "a", Moved: true}, {Node: "b"}}, 2, WaveProgress{Send: []string{"a"}}},
		{"in flight fill the limit: nothing", []WaveNode{inFlight("a"), inFlight("b"), {Node: "c"}}, 2, WaveProgress{}},
		{"in flight leave room for one", []WaveNode{inFlight("a"), {Node: "b"}, {Node: "c"}}, 2, WaveProgress{Move: []string{"b"}}},
		{"all applied: done", []WaveNode{applied("a"), applied("b")}, 1, WaveProgress{Done: true}},
		{"out of the rollout counts for nothing", []WaveNode{applied("a"), {Node: "b", Out: true}}, 1, WaveProgress{Done: true}},
		{"a failure halts, first in order", []WaveNode{applied("a"), {Node: "b", Moved: true, Sent: true, Answered: true, Outcome: events.OutcomeFailed, Why: "x"},
			{Node: "c", Moved: true, Sent: true, Answered: true, Outcome: events.OutcomeRefused, Why: "y"}}, 3,
			WaveProgress{Halt: &WaveHalt{Node: "b", Why: "failed: x"}}},
		{"a refusal halts", []WaveNode{{Node: "c", Moved: true, Sent: true, Answered: true, Outcome: events.OutcomeRefused, Why: "y"}}, 1,
			WaveProgress{Halt: &WaveHalt{Node: "c", Why: "refused: y"}}},
	}
	for _, c := range cases {
		if diff := cmp.Diff(c.want, ProgressWave(c.nodes, c.limit)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", c.name, diff)
		}
	}
}

// Rule 23, the gate: programs running, no standing failing, the bake
// stood; a crash loop halts. Each row fails when the gate decides otherwise.
func TestGate(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	ok := func(n string) GateNode {
		return GateNode{Node: n, Reported: true, ReportedAt: t0, Runtime: RuntimeRunning, RuntimeSince: t0}
	}
	cases := []struct {
		name  string
		nodes []GateNode
		runs  bool
		bake  time.Duration
		now   time.Time
		hold  GateHold
		halt  *WaveHalt
	}{
		{"all running, no bake: passes", []GateNode{ok("a"), ok("b")}, true, 0, t0, GateHold{}, nil},
		{"a program not running holds", []GateNode{ok("a"), {Node: "b", Reported: true, ReportedAt: t0, Runtime: "exited"}}, true, 0, t0,
			GateHold{Node: "b", Why: "its program is not running (exited)"}, nil},
		{"a program not reported yet holds", []GateNode{{Node: "b", Reported: true, ReportedAt: t0}}, true, 0, t0,
			GateHold{Node: "b", Why: "its program is not running (not reported yet)"}, nil},
		{"no program to run: its state is not read", []GateNode{{Node: "b", Reported: true, ReportedAt: t0}}, false, 0, t0, GateHold{}, nil},
		{"a crash loop halts, past an earlier hold", []GateNode{{Node: "a", Reported: true, Runtime: "exited"}, {Node: "b", Reported: true, Runtime: RuntimeCrashLooping, RuntimeDetail: "exit 1"}}, true, 0, t0,
			GateHold{}, &WaveHalt{Node: "b", Why: "its program is crash-looping: exit 1"}},
		{"a failing standing holds", []GateNode{func() GateNode { g := ok("a"); g.Standing = "p on a is failing c: down"; return g }()}, true, 0, t0,
			GateHold{Node: "a", Why: "p on a is failing c: down"}, nil},
		{"the bake holds from the report", []GateNode{ok("a")}, true, time.Minute, t0.Add(30 * time.Second),
			GateHold{Node: "a", Why: "baking until 2026-01-01T12:01:00Z", Baking: true}, nil},
		{"the bake holds from the program's last start", []GateNode{func() GateNode { g := ok("a"); g.RuntimeSince = t0.Add(time.Minute); return g }()}, true, time.Minute, t0.Add(90 * time.Second),
			GateHold{Node: "a", Why: "baking until 2026-01-01T12:02:00Z", Baking: true}, nil},
		{"the bake stood", []GateNode{ok("a")}, true, time.Minute, t0.Add(time.Minute), GateHold{}, nil},
		{"a node that never reported is out", []GateNode{{Node: "a"}}, true, time.Minute, t0, GateHold{}, nil},
	}
	for _, c := range cases {
		hold, halt := Gate(c.nodes, c.runs, false, c.bake, c.now)
		if diff := cmp.Diff(c.hold, hold); diff != "" {
			t.Errorf("%s: hold (-want +got):\n%s", c.name, diff)
		}
		if diff := cmp.Diff(c.halt, halt); diff != "" {
			t.Errorf("%s: halt (-want +got):\n%s", c.name, diff)
		}
	}
}

// Rule 23 with a health check (issue 31): a wave waits for its programs
// to be healthy, halts on one that turned unhealthy after its node applied
// the build or whose process is the build's, only holds on an older
// process unhealthy since before, and bakes from when it turned healthy. Each row fails when the gate decides otherwise.
func TestGateWithAHealthCheck(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	node := func(n, health string, since time.Time) GateNode {
		return GateNode{Node: n, Reported: true, ReportedAt: t0, Runtime: RuntimeRunning, RuntimeSince: t0, Applied: 5, RuntimeDeclaration: 5,
			Health: health, HealthSince: since, HealthDetail: map[string]string{HealthUnhealthy: "3 failed check(s) in a row; GET / answered 503"}[health]}
	}
	healthy := node("a", HealthHealthy, t0)
	cases := []struct {
		name    string
		nodes   []GateNode
		checked bool
		bake    time.Duration
		now     time.Time
		hold    GateHold
		halt    *WaveHalt
	}{
		{"every program healthy: passes", []GateNode{healthy, node("b", HealthHealthy, t0)}, true, 0, t0, GateHold{}, nil},
		{"a program still starting holds", []GateNode{healthy, node("b", "starting", t0)}, true, 0, t0,
			GateHold{Node: "b", Why: "its program is not healthy yet (starting)"}, nil},
		{"a program whose check said nothing since it started holds", []GateNode{node("b", "", time.Time{})}, true, 0, t0,
			GateHold{Node: "b", Why: "its program is not healthy yet (no check reported yet)"}, nil},
		{"unhealthy after the apply halts, past an earlier hold", []GateNode{node("a", "starting", t0), node("b", HealthUnhealthy, t0.Add(time.Second))}, true, 0, t0.Add(time.Second),
			GateHold{}, &WaveHalt{Node: "b", Why: "its program is unhealthy: 3 failed check(s) in a row; GET / answered 503"}},
		{"unhealthy since before the apply, its process older than the build, only holds", []GateNode{func() GateNode {
			g := node("b", HealthUnhealthy, t0.Add(-time.Minute))
			g.RuntimeDeclaration = 4
			return g
		}()}, true, 0, t0,
			GateHold{Node: "b", Why: "its program is unhealthy since before it applied the build (3 failed check(s) in a row; GET / answered 503); waiting for its check under the build"}, nil},
		{"healthy by a process from before the build holds", []GateNode{func() GateNode {
			g := node("b", HealthHealthy, t0.Add(-time.Minute))
			g.RuntimeDeclaration = 4
			return g
		}()}, true, 0, t0,
			GateHold{Node: "b", Why: "its program's process is from before the build (started under declaration 4, the build came in 5); waiting for it to start again"}, nil},
		// A report kept while the bus was busy is stamped when it is sent
		// at last, after the new process's checks: the process says whose
		// verdict it is, not the clocks.
		{"unhealthy by a process started under the build halts, whatever the clocks", []GateNode{node("b", HealthUnhealthy, t0.Add(-time.Minute))}, true, 0, t0,
			GateHold{}, &WaveHalt{Node: "b", Why: "its program is unhealthy: 3 failed check(s) in a row; GET / answered 503"}},
		{"no check in the build: health is not read", []GateNode{node("b", HealthUnhealthy, t0)}, false, 0, t0, GateHold{}, nil},
		{"a program not running holds for that, not for its health", []GateNode{func() GateNode { g := node("b", HealthUnhealthy, t0); g.Runtime = "exited"; return g }()}, true, 0, t0,
			GateHold{Node: "b", Why: "its program is not running (exited)"}, nil},
		{"the bake holds from turning healthy", []GateNode{node("a", HealthHealthy, t0.Add(time.Minute))}, true, time.Minute, t0.Add(90 * time.Second),
			GateHold{Node: "a", Why: "baking until 2026-01-01T12:02:00Z", Baking: true}, nil},
		{"the bake stood since healthy", []GateNode{node("a", HealthHealthy, t0.Add(time.Minute))}, true, time.Minute, t0.Add(2 * time.Minute), GateHold{}, nil},
	}
	for _, c := range cases {
		hold, halt := Gate(c.nodes, true, c.checked, c.bake, c.now)
		if diff := cmp.Diff(c.hold, hold); diff != "" {
			t.Errorf("%s: hold (-want +got):\n%s", c.name, diff)
		}
		if diff := cmp.Diff(c.halt, halt); diff != "" {
			t.Errorf("%s: halt (-want +got):\n%s", c.name, diff)
		}
	}
}

// Rule 23, the step: start, wait, finish, or halt on a failure or a
// deadline (never on the bake alone). Each row fails when the step changes.
func TestNextRolloutStep(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	at := RolloutAt{Wave: 0, Waves: 2, WaveAt: t0, Deadline: time.Hour}
	late := t0.Add(2 * time.Hour)
	halt := &WaveHalt{Node: "a", Why: "failed: x"}
	cases := []struct {
		name string
		at   RolloutAt
		done bool
		hold GateHold
		halt *WaveHalt
		now  time.Time
		want RolloutStep
	}{
		{"before the first wave: start it", RolloutAt{Wave: -1, Waves: 2}, false, GateHold{}, nil, t0, RolloutStep{Kind: StepStartWave, Wave: 0}},
		{"a halt halts", at, false, GateHold{}, halt, t0, RolloutStep{Kind: StepHalt, Wave: 0, Halt: halt}},
		{"not applied, in time: wait", at, false, GateHold{}, nil, t0, RolloutStep{Kind: StepWait, Wave: 0}},
		{"not applied past the deadline: halt naming the node", at, false, GateHold{}, nil, late,
			RolloutStep{Kind: StepHalt, Wave: 0, Halt: &WaveHalt{Node: "b", Why: "it did not apply the build within the wave's deadline of 1h0m0s"}}},
		{"held past the deadline: halt", at, true, GateHold{Node: "a", Why: "its program is not running (exited)"}, nil, late,
			RolloutStep{Kind: StepHalt, Wave: 0, Halt: &WaveHalt{Node: "a", Why: "its program is not running (exited), past the wave's deadline of 1h0m0s"}}},
		{"baking past the deadline: wait", at, true, GateHold{Node: "a", Why: "baking", Baking: true}, nil, late, RolloutStep{Kind: StepWait, Wave: 0}},
		{"no deadline never halts", RolloutAt{Wave: 0, Waves: 2, WaveAt: t0}, false, GateHold{}, nil, late, RolloutStep{Kind: StepWait, Wave: 0}},
		{"passed its gate: the next wave", at, true, GateHold{}, nil, t0, RolloutStep{Kind: StepStartWave, Wave: 1}},
		{"the last wave passed: finish", RolloutAt{Wave: 1, Waves: 2, WaveAt: t0}, true, GateHold{}, nil, t0, RolloutStep{Kind: StepFinish, Wave: 1}},
	}
	for _, c := range cases {
		if diff := cmp.Diff(c.want, NextRolloutStep(c.at, c.done, c.hold, c.halt, "b", c.now)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", c.name, diff)
		}
	}
}
