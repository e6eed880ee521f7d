package agent_test

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/meshctl/mesh/agent"
	"github.com/meshctl/mesh/embedded/embeddedtest"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/wire"
)

// An interrupted apply is a fact (issue 28): an agent killed part way
// through an apply leaves its state holding the apply it began (saved
// before the first file is written) and some files new, some old. Started
// again, it says so (ApplyInterrupted) before it applies again, and
// history shows the interrupted apply and then the one that completed it;
// said once, not at every start.
func TestAnInterruptedApplyIsInHistory(t *testing.T) {
	t.Parallel()
	m := newMesh(t)
	m.Enroll("web-1")
	root := filepath.Join(t.TempDir(), "root")
	stateFile := filepath.Join(root+".state", "state.json")
	// Until the report of an apply is saved, the state on disk says the
	// apply is under way: what a kill in that window leaves.
	onDisk := make(chan *agent.Applying, 1)
	stop := m.AgentWith("web-1", root, func(c *agent.Config) {
		c.Observe = func(o agent.Observation) {
			if _, ok := o.Report.(events.DeclarationApplied); ok {
				var st agent.State
				b, _ := os.ReadFile(stateFile)
				json.Unmarshal(b, &st)
				select {
				case onDisk <- st.Applying:
				default:
				}
			}
		}
	})
	m.WriteModule(motdModule)
	m.Assign("web-1", "motd", nil)
	first := m.Push("web-1").Sent[0]
	m.Report("web-1", first.Digest)
	stop()
	if ap := <-onDisk; ap == nil || ap.Sequence != first.Sequence || ap.Digest != first.Digest || ap.BeganAt.IsZero() ||
		!slices.Contains(ap.Created, "/etc/motd") {
		t.Fatalf("the state on disk while the apply of %d was reported: applying %+v", first.Sequence, ap)
	}

	m.WriteModule(`{"module":"banner","resources":[{"kind":"file","path":"/etc/banner","mode":"0644","content":"new\n"}]}`)
	m.Assign("web-1", "banner", nil)
	cut := m.Push("web-1").Sent[0]
	// The agent killed while applying cut: its state as beginApply saved
	// it, and one of cut's files written.
	var st agent.State
	b, err := os.ReadFile(stateFile)
	m.Must(err)
	m.Must(json.Unmarshal(b, &st))
	began := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	st.Applying = &agent.Applying{Sequence: cut.Sequence, Digest: cut.Digest, BeganAt: began, Created: []string{"/etc/banner"}}
	b, _ = json.Marshal(st)
	m.Must(os.WriteFile(stateFile, b, 0o600))
	m.Must(os.WriteFile(filepath.Join(root, "etc/banner"), []byte("new\n"), 0o644))
	// And a write of /etc/motd cut part way, its temporary file beside it:
	// motd comes out the same, so no write of it would reuse the file.
	cutWrite := filepath.Join(root, "etc/.mesh-motd.tmp")
	m.Must(os.WriteFile(cutWrite, []byte("half a mot"), 0o644))

	stop = m.AgentAt("web-1", root)
	if r := m.Report("web-1", cut.Digest); r.Outcome != "applied" {
		t.Fatalf("the apply after the cut: %+v", r)
	}
	if _, err := os.Stat(cutWrite); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the cut write's temporary file is still under the root after the restart: %v", err)
	}
	kinds := func() (out []wire.HistoryEntry) {
		h, err := m.H.History.History(m.Ctx, wire.HistoryRequest{Node: "web-1"})
		m.Must(err)
		for _, e := range h.Entries {
			if e.Sequence == cut.Sequence {
				out = append(out, e)
			}
		}
		return out
	}
	got := kinds()
	if len(got) != 3 || got[0].Kind != "declaration" || got[1].Kind != "interrupted" || got[2].Kind != "applied" ||
		got[1].Digest != cut.Digest || !got[1].BeganAt.Equal(began) {
		t.Fatalf("history of sequence %d: %+v, want sent, interrupted (began %s), applied", cut.Sequence, got, began)
	}
	// The agent saves its state after its report is acknowledged (send), so
	// the fold may hold the report a moment before the save clears it.
	embeddedtest.Eventually(t, "the state after the completed apply to hold no apply begun", func() bool {
		b, err = os.ReadFile(stateFile)
		m.Must(err)
		st = agent.State{}
		m.Must(json.Unmarshal(b, &st))
		return st.Applying == nil
	})

	// Started again, it has nothing to say of it: the next push's report
	// comes after anything the start said.
	stop()
	m.AgentAt("web-1", root)
	m.WriteModule(`{"module":"banner","resources":[{"kind":"file","path":"/etc/banner","mode":"0644","content":"newer\n"}]}`)
	m.Assign("web-1", "banner", nil)
	m.Report("web-1", m.Push("web-1").Sent[0].Digest)
	h, err := m.H.History.History(m.Ctx, wire.HistoryRequest{Node: "web-1"})
	m.Must(err)
	n := 0
	for _, e := range h.Entries {
		if e.Kind == "interrupted" {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d interrupted applies in history, want 1: %+v", n, h.Entries)
	}

	// The file the cut apply made is the mesh's: taken away, it goes. (It
	// was adopted, and stayed, when the cut was not remembered.)
	_, err = m.H.Nodes.Unassign(m.Ctx, wire.UnassignRequest{CommandID: wire.NewCommandID(), Node: "web-1", Module: "banner"})
	m.Must(err)
	m.Report("web-1", m.Push("web-1").Sent[0].Digest)
	if _, err := os.Stat(filepath.Join(root, "etc/banner")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("/etc/banner, made by the cut apply, stayed after banner left the node: %v", err)
	}
}
