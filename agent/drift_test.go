package agent_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/meshctl/mesh/agent"
	"github.com/meshctl/mesh/wire"
)

const motdModule = `{"module":"motd","resources":[{"kind":"directory","path":"/etc","mode":"0755"},
  {"kind":"file","path":"/etc/motd","mode":"0644","content":"welcome\n"}]}`

// historyDrift is node's drift entries in history.
func (m *mesh) historyDrift(node string) []wire.HistoryEntry {
	m.T.Helper()
	h, err := m.H.History.History(m.Ctx, wire.HistoryRequest{Node: node})
	m.Must(err)
	var out []wire.HistoryEntry
	for _, e := range h.Entries {
		if e.Kind == "drift" {
			out = append(out, e)
		}
	}
	return out
}

// Drift (issue 15): a hand edit to a managed file is put back within the
// check interval and shown in history as a corrective change; with
// --drift report it is left as found, the node is drifted until the next
// apply, and push --behind sends that apply. Fails when the check does
// not run, does not compare content, or the report is lost.
func TestDriftIsCorrectedOrReported(t *testing.T) {
	t.Parallel()
	m := newMesh(t)
	m.Enroll("fixed")
	m.Enroll("watched")
	check := func(report bool) func(*agent.Config) {
		return func(c *agent.Config) { c.DriftEvery, c.DriftReport = 20*time.Millisecond, report }
	}
	roots := map[string]string{"fixed": filepath.Join(t.TempDir(), "root"), "watched": filepath.Join(t.TempDir(), "root")}
	m.AgentWith("fixed", roots["fixed"], check(false))
	m.AgentWith("watched", roots["watched"], check(true))
	m.WriteModule(motdModule)
	for _, n := range []string{"fixed", "watched"} {
		m.Assign(n, "motd", nil)
		m.Report(n, m.Push(n).Sent[0].Digest)
	}
	motd := func(node string) string {
		b, _ := os.ReadFile(filepath.Join(roots[node], "etc/motd"))
		return string(b)
	}
	for _, n := range []string{"fixed", "watched"} {
		m.Must(os.WriteFile(filepath.Join(roots[n], "etc/motd"), []byte("edited by hand\n"), 0o644))
	}

	eventually(t, "the hand edit to be put back", func() bool { return motd("fixed") == "welcome\n" })
	eventually(t, "the correction in history", func() bool { return len(m.historyDrift("fixed")) > 0 })
	if d := m.historyDrift("fixed")[0]; !d.Corrected || !slices.Equal(d.Paths, []string{"/etc/motd"}) {
		t.Fatalf("fixed's drift in history: %+v", d)
	}
	if s := m.Status()["fixed"]; s.State != wire.StateCurrent {
		t.Fatalf("a corrected node is %s: %+v", s.State, s)
	}

	eventually(t, "watched to be drifted", func() bool { return m.Status()["watched"].State == wire.StateDrifted })
	if got := motd("watched"); got != "edited by hand\n" {
		t.Fatalf("--drift report put the file back: %q", got)
	}
	if d := m.historyDrift("watched"); len(d) != 1 || d[0].Corrected || !strings.Contains(m.Status()["watched"].Detail, "/etc/motd") {
		t.Fatalf("watched's drift: %+v, status %+v (said once, not at every check)", d, m.Status()["watched"])
	}
	r, err := m.H.Push.Push(m.Ctx, wire.PushRequest{CommandID: wire.NewCommandID(), Behind: true})
	m.Must(err)
	if len(r.Sent) != 1 || r.Sent[0].Node != "watched" {
		t.Fatalf("push --behind with a drifted node sent %+v", r.Sent)
	}
	m.Report("watched", r.Sent[0].Digest)
	if s := m.Status()["watched"]; s.State != wire.StateCurrent || motd("watched") != "welcome\n" {
		t.Fatalf("after the apply: %+v, motd %q", s, motd("watched"))
	}
	m.Verified()
}
