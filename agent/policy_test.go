package agent_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/projections"
	"github.com/meshctl/mesh/wire"
)

// Upgrade policies with real agents (rule 23): a new build registered
// moves the auto node by a rollout that starts by itself, and leaves the
// pinned and the manual node where they are, each held with why (not
// behind: push --behind sends them nothing) and the mesh well; an
// operator's rollout then moves the manual node and never the pinned one,
// which assign moves. Fails when a policy is not held, or a held node is
// called behind or sent anything.
func TestUpgradePolicies(t *testing.T) {
	t.Parallel()
	m := newMesh(t)
	roots := map[string]string{}
	for _, n := range []string{"pin", "man", "auto"} {
		m.Enroll(n)
		roots[n], _ = m.Agent(n)
	}
	motd := func(content string) {
		m.WriteModule(`{"module":"motd","resources":[{"kind":"file","path":"/etc/motd","mode":"0644","content":"` + content + `\n"}]}`)
	}
	read := func(n string) string { b, _ := os.ReadFile(filepath.Join(roots[n], "etc/motd")); return string(b) }
	motd("one")
	for n, p := range map[string]events.Policy{"pin": events.PolicyPinned, "man": "", "auto": events.PolicyAuto} {
		a, err := m.H.Nodes.Assign(m.Ctx, wire.AssignRequest{CommandID: wire.NewCommandID(), Node: n, Module: "motd", Policy: string(p)})
		m.Must(err)
		if a.Policy != p.Or() {
			t.Fatalf("%s assigned under policy %q, want %q", n, a.Policy, p.Or())
		}
	}
	for _, s := range m.Push("").Sent {
		m.Report(s.Node, s.Digest)
	}

	motd("two")
	eventually(t, "the auto node to take the new build by itself", func() bool { return read("auto") == "two\n" && m.Status()["auto"].State == wire.StateCurrent })
	list, err := m.H.Rollouts.ListRollouts(m.Ctx, wire.Empty{})
	m.Must(err)
	if len(list.Rollouts) != 1 || !list.Rollouts[0].Auto || !onlyNode(list.Rollouts[0].Waves, "auto") {
		t.Fatalf("the rollout the new build started: %+v", list.Rollouts)
	}
	st := m.Status()
	for n, why := range map[string]string{"pin": "motd is pinned to", "man": "waits for a rollout (policy manual"} {
		if st[n].State != wire.StateHeld || !strings.Contains(st[n].Detail, why) || read(n) != "one\n" {
			t.Fatalf("%s after a new build: %+v holding %q, want held: %s", n, st[n], read(n), why)
		}
	}
	if s, err := m.H.Status.Status(m.Ctx, wire.StatusRequest{}); err != nil || !s.Well {
		t.Fatalf("held nodes made the mesh not well: %v %+v", err, s.Causes)
	}
	if r, err := m.H.Push.Push(m.Ctx, wire.PushRequest{CommandID: wire.NewCommandID(), Behind: true}); err != nil || len(r.Sent) != 0 {
		t.Fatalf("push --behind sent held nodes %+v (%v)", r.Sent, err)
	}
	// The new build's rollout is not started twice, whatever the drive.
	m.Must(m.H.Rollouts.DriveRollouts(m.Ctx))
	if list, _ := m.H.Rollouts.ListRollouts(m.Ctx, wire.Empty{}); len(list.Rollouts) != 1 {
		t.Fatalf("the auto rollout was started again: %+v", list.Rollouts)
	}

	// An operator's rollout of every node moves the manual one only.
	plan, err := m.H.Rollouts.PlanRollout(m.Ctx, wire.RolloutPlanRequest{Module: "motd", Waves: []wire.WaveSpec{{Name: "all", Selector: "*"}}})
	m.Must(err)
	var planned []string
	for _, p := range plan.Waves[0].Nodes {
		if !p.Same {
			planned = append(planned, p.Node)
		}
	}
	if len(plan.Held) != 1 || plan.Held[0].Node != "pin" || len(planned) != 1 || planned[0] != "man" {
		t.Fatalf("the plan of a rollout: held %+v, wave %+v", plan.Held, plan.Waves[0].Nodes)
	}
	if _, err := m.H.Rollouts.StartRollout(m.Ctx, wire.RolloutRequest{CommandID: wire.NewCommandID(), Module: "motd",
		Waves: []wire.WaveSpec{{Name: "pinned", Selector: "name=pin"}}}); err == nil || !strings.Contains(err.Error(), "pinned one stays") {
		t.Fatalf("a wave of only a pinned node: %v", err)
	}
	r, err := m.H.Rollouts.StartRollout(m.Ctx, wire.RolloutRequest{CommandID: wire.NewCommandID(), Module: "motd", Waves: []wire.WaveSpec{{Name: "all", Selector: "*"}}})
	m.Must(err)
	eventually(t, "the operator's rollout to finish", func() bool { return m.rolloutState(r.ID).State == projections.RolloutFinished })
	if read("man") != "two\n" || read("pin") != "one\n" || m.Status()["pin"].State != wire.StateHeld {
		t.Fatalf("after the rollout: man %q, pin %q %+v", read("man"), read("pin"), m.Status()["pin"])
	}
	// The declaration says which rollout sent it.
	if row, _, _ := m.H.Core.Proj.Node("man"); row.LastSent.By != "rollout "+r.ID {
		t.Fatalf("man's declaration recorded as sent by %q", row.LastSent.By)
	}

	// The policy changes without the build: assign names the build it has.
	pinned := m.Status()["pin"]
	a, err := m.H.Nodes.Assign(m.Ctx, wire.AssignRequest{CommandID: wire.NewCommandID(), Node: "pin", Module: "motd", Policy: "manual", Build: plan.Held[0].Node})
	if err == nil || !strings.Contains(err.Error(), "has no build pin") {
		t.Fatalf("assign of a build that is not: %v %+v", err, a)
	}
	rows, err := m.H.Status.ShowNode(m.Ctx, wire.NameRequest{Name: "pin"})
	m.Must(err)
	a, err = m.H.Nodes.Assign(m.Ctx, wire.AssignRequest{CommandID: wire.NewCommandID(), Node: "pin", Module: "motd", Policy: "manual", Build: rows.Assignments[0].Build})
	m.Must(err)
	if !a.Changed || a.Build != a.Previous || a.Policy != events.PolicyManual || m.Status()["pin"].Sequence != pinned.Sequence {
		t.Fatalf("the policy changed alone: %+v", a)
	}
	// And assign moves it to the newest.
	m.Assign("pin", "motd", nil)
	m.Report("pin", m.Push("pin").Sent[0].Digest)
	if read("pin") != "two\n" || m.Status()["pin"].State != wire.StateCurrent {
		t.Fatalf("pin after assign and push: %q %+v", read("pin"), m.Status()["pin"])
	}
	m.Verified()
}

// onlyNode says whether every wave of a rollout holds only node n.
func onlyNode(waves []events.RolloutWave, n string) bool {
	for _, w := range waves {
		if len(w.Nodes) != 1 || w.Nodes[0] != n {
			return false
		}
	}
	return len(waves) > 0
}
