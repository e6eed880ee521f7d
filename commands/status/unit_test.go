package status_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/meshctl/mesh/agent"
	"github.com/meshctl/mesh/agent/agenttest"
	"github.com/meshctl/mesh/compose"
	"github.com/meshctl/mesh/embedded/embeddedtest"
	"github.com/meshctl/mesh/wire"
)

// A node whose machine has no systemd is sent a module's other resources
// and not its units (issue 32), and plan, status and node show each say
// which unit was left out and why, as they say a module left out: the node
// is partial, not current. Fails when a unit left out goes unsaid, or the
// node passes for current.
func TestAUnitLeftOutIsSaidByPlanStatusAndNodeShow(t *testing.T) {
	m := agenttest.New(t)
	m.Enroll("mac")
	root := filepath.Join(t.TempDir(), "root")
	m.AgentWith("mac", root, func(c *agent.Config) {
		c.Facts = func() (map[string]string, []string) { return map[string]string{"os": "linux"}, []string{"linux"} }
		c.Systemctl = "/nonexistent/systemctl" // never called: a call would fail the apply
	})
	m.Register("tmpclean.json")
	m.WriteModule(`{"module":"motd","resources":[{"kind":"file","path":"/etc/motd","mode":"0644","content":"hi\n"}]}`)
	m.Assign("mac", "tmpclean", nil)
	m.Assign("mac", "motd", nil)
	reason := func(unit string) string {
		return "unit " + unit + " of tmpclean needs systemd, mac has linux (its agent reports systemd where systemd runs the machine)"
	}
	want := []compose.LeftOut{{Module: "tmpclean", Unit: "tmpclean.service", Reason: reason("tmpclean.service")},
		{Module: "tmpclean", Unit: "tmpclean.timer", Reason: reason("tmpclean.timer")}}
	var plan wire.Plan
	embeddedtest.Eventually(t, "mac's facts to be folded", func() bool {
		var err error
		plan, err = m.H.Push.Plan(m.Ctx, wire.NameRequest{Name: "mac"})
		m.Must(err)
		return len(plan.LeftOut) == 2
	})
	if !slices.Equal(plan.LeftOut, want) || !plan.Composable {
		t.Fatalf("plan's left out: %+v", plan.LeftOut)
	}
	r := m.Push("mac")
	if !strings.Contains(r.Sent[0].Note, "2 left out: "+reason("tmpclean.service")) {
		t.Fatalf("the push did not say the units were left out: %+v", r.Sent[0])
	}
	m.Report("mac", r.Sent[0].Digest)
	if _, err := os.Stat(filepath.Join(root, "etc/motd")); err != nil {
		t.Fatalf("the rest of the node was not applied: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, "etc/systemd")); !os.IsNotExist(err) {
		t.Fatalf("a unit reached a node without systemd: %v", err)
	}
	s := m.WaitState("mac", wire.StatePartial)
	if s.Detail != "left out: "+reason("tmpclean.service")+"; left out: "+reason("tmpclean.timer") {
		t.Fatalf("status says mac is partial because %q", s.Detail)
	}
	n, err := m.H.Status.ShowNode(m.Ctx, wire.NameRequest{Name: "mac"})
	m.Must(err)
	if n.State != wire.StatePartial || !slices.Equal(n.LeftOut, want) {
		t.Fatalf("node show: %s, left out %+v", n.State, n.LeftOut)
	}
}
