package agent_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meshctl/mesh/agent"
	"github.com/meshctl/mesh/wire"
)

// Capabilities and facts from the machine (issue 15): a node enrolled with
// no capabilities hosts a module that requires linux once its agent has
// reported its facts, and its templates read them; an operator's node set
// changes the declared capabilities, and what the node would be sent
// follows. Fails when facts are not folded into composition, or node set
// changes nothing.
func TestFactsAndDeclaredCapabilities(t *testing.T) {
	t.Parallel()
	m := newMesh(t)
	m.Enroll("box")
	m.WriteModule(`{"module":"hello","requires":["linux"],"resources":[{"kind":"file","path":"/etc/hello","mode":"0644",
	  "template":"{{.Node.Facts.os}} on {{.Node.Facts.arch}}\n"}]}`)
	m.WriteModule(`{"module":"gpu-job","requires":["gpu"],"resources":[{"kind":"file","path":"/etc/gpu","mode":"0644","content":"x\n"}]}`)
	m.Assign("box", "hello", nil)
	m.Assign("box", "gpu-job", nil)
	plan, err := m.H.Push.Plan(m.Ctx, wire.NameRequest{Name: "box"})
	m.Must(err)
	if len(plan.LeftOut) != 2 {
		t.Fatalf("before any facts, box should host neither module: %+v", plan.LeftOut)
	}
	root := filepath.Join(t.TempDir(), "root")
	m.AgentWith("box", root, func(c *agent.Config) {
		c.Facts = func() (map[string]string, []string) {
			return map[string]string{"os": "linux", "arch": "riscv64"}, []string{"linux", "riscv64"}
		}
	})
	eventually(t, "box's facts", func() bool {
		n, err := m.H.Status.ShowNode(m.Ctx, wire.NameRequest{Name: "box"})
		m.Must(err)
		return n.Facts["os"] == "linux"
	})
	r := m.Push("box")
	m.Report("box", r.Sent[0].Digest)
	b, err := os.ReadFile(filepath.Join(root, "etc/hello"))
	if err != nil || string(b) != "linux on riscv64\n" {
		t.Fatalf("the template reading facts wrote %q (%v)", b, err)
	}
	if !strings.Contains(r.Sent[0].Note, "gpu-job") {
		t.Fatalf("the push did not say gpu-job was left out: %+v", r.Sent[0])
	}

	// The operator declares a gpu: gpu-job is hosted, and box is behind.
	c, err := m.H.Nodes.ChangeNode(m.Ctx, wire.ChangeNodeRequest{CommandID: wire.NewCommandID(), Name: "box", Capabilities: []string{"gpu"}})
	m.Must(err)
	if !c.Changed {
		t.Fatalf("node set: %+v", c)
	}
	if s := m.Status()["box"]; s.State != wire.StateBehind {
		t.Fatalf("after node set box is %s", s.State)
	}
	m.Report("box", m.Push("box").Sent[0].Digest)
	if _, err := os.Stat(filepath.Join(root, "etc/gpu")); err != nil {
		t.Fatalf("gpu-job not applied after the capability was declared: %v", err)
	}
	again, err := m.H.Nodes.ChangeNode(m.Ctx, wire.ChangeNodeRequest{CommandID: wire.NewCommandID(), Name: "box", Capabilities: []string{"gpu"}})
	if err != nil || again.Changed {
		t.Fatalf("the same node set again: %+v %v (nothing to do)", again, err)
	}
	m.Verified()
}
