package agent_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meshctl/mesh/projections"
	"github.com/meshctl/mesh/verdict"
	"github.com/meshctl/mesh/wire"
)

// Issue 31, point 4: a node sent mesh declare is held. Every push that does
// not name it (push, push --behind, a rollout's wave) leaves it out and says
// so; status shows it held; a push naming it sends what the mesh composes
// and ends the hold. Fails when any of those pushes overwrites the hand's
// file, or when the named push does not.
func TestAHandDeclarationHoldsItsNodeUntilAPushNamesIt(t *testing.T) {
	t.Parallel()
	m := newMesh(t)
	roots := map[string]string{}
	for _, n := range []string{"hand", "other"} {
		m.Enroll(n, "linux")
		roots[n], _ = m.Agent(n)
	}
	m.WriteModule(`{"module":"motd","resources":[{"kind":"file","path":"/etc/motd","mode":"0644","content":"one\n"}]}`)
	for _, n := range []string{"hand", "other"} {
		m.Assign(n, "motd", nil)
	}
	m.Push("")
	m.WaitState("hand", wire.StateCurrent)
	d, err := m.H.Push.Declare(m.Ctx, wire.DeclareRequest{CommandID: wire.NewCommandID(), Node: "hand", File: "h.json",
		Body: `{"resources":[{"kind":"file","path":"/etc/motd","mode":"0644","content":"by hand\n"}]}`})
	m.Must(err)
	m.Report("hand", d.Digest)
	if s := m.WaitState("hand", wire.StateHeld); s.Detail != verdict.HandHeldWhy {
		t.Fatalf("status of a node held by its hand declaration: %+v", s)
	}
	motd := func(n string) string {
		b, _ := os.ReadFile(filepath.Join(roots[n], "etc/motd"))
		return string(b)
	}
	leftOut := func(how string, r wire.PushReply, err error) {
		t.Helper()
		m.Must(err)
		for _, s := range r.Sent {
			if s.Node == "hand" {
				t.Fatalf("%s sent the held node: %+v", how, r)
			}
		}
		if len(r.Held) != 1 || r.Held[0].Node != "hand" || r.Held[0].Reason != verdict.HandHeldWhy {
			t.Fatalf("%s does not name the held node: %+v", how, r.Held)
		}
	}
	// A new build makes both nodes behind what the mesh composes.
	m.WriteModule(`{"module":"motd","resources":[{"kind":"file","path":"/etc/motd","mode":"0644","content":"two\n"}]}`)
	m.Assign("hand", "motd", nil)
	m.Assign("other", "motd", nil)
	r, err := m.H.Push.Push(m.Ctx, wire.PushRequest{CommandID: wire.NewCommandID(), Behind: true})
	leftOut("push --behind", r, err)
	r, err = m.H.Push.Push(m.Ctx, wire.PushRequest{CommandID: wire.NewCommandID(), Selector: "*"})
	leftOut("push --selector '*'", r, err)
	r, err = m.H.Push.Push(m.Ctx, wire.PushRequest{CommandID: wire.NewCommandID()})
	leftOut("push", r, err)
	// A rollout's wave may not pass a node it cannot send to: halted, named.
	m.WriteModule(`{"module":"motd","resources":[{"kind":"file","path":"/etc/motd","mode":"0644","content":"three\n"}]}`)
	ro, err := m.H.Rollouts.StartRollout(m.Ctx, wire.RolloutRequest{CommandID: wire.NewCommandID(), Module: "motd",
		Waves: []wire.WaveSpec{{Name: "all", Selector: "*"}}})
	m.Must(err)
	eventually(t, "the rollout to halt at the held node", func() bool {
		s := m.rolloutState(ro.ID)
		return s.State == projections.RolloutHalted && s.Node == "hand" && strings.Contains(s.Why, "hand declaration")
	})
	if got := motd("hand"); got != "by hand\n" {
		t.Fatalf("the held node's file is %q after pushes that did not name it", got)
	}
	if s := m.Status()["hand"]; s.State != wire.StateHeld {
		t.Fatalf("hand after pushes that did not name it: %+v", s)
	}
	// Named, it is sent what the mesh composes, and the hold ends.
	r = m.Push("hand")
	if len(r.Sent) != 1 || r.Sent[0].Node != "hand" || len(r.Held) != 0 {
		t.Fatalf("a push naming the held node: %+v", r)
	}
	m.WaitState("hand", wire.StateCurrent)
	if got := motd("hand"); got == "by hand\n" {
		t.Fatalf("a push naming the held node left the hand's file")
	}
}
