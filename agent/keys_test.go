package agent_test

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meshctl/mesh/agent"
	"github.com/meshctl/mesh/embedded/embeddedtest"
	"github.com/meshctl/mesh/events/store"
	"github.com/nats-io/nats.go"
)

// Each recording of the report key is its own message under its own id: a
// start a moment after the last stores its record too. Under one fixed id
// per key, a start minutes later stored a second message under the first's
// id, a log that restores lost (issue 28); within the window it stored
// nothing.
//
// Only a node enrolled before nodes made their own keys records its key at
// start: one that made them enrolled its report key with the rest.
func TestEachStartRecordsItsKeyUnderItsOwnID(t *testing.T) {
	t.Parallel()
	m := newMesh(t)
	m.Enroll("web-1")
	root := filepath.Join(t.TempDir(), "root")
	records := func() (ids map[string]bool, n int) {
		ids = map[string]bool{}
		m.Must(m.H.Core.Store.Read(m.Ctx, storeReadReports("web-1"), func(msg storeMsg) error {
			if strings.HasSuffix(msg.Subject, ".ReportKeyRecorded") {
				ids[store.MsgID(msg.Header)] = true
				n++
			}
			return nil
		}))
		return ids, n
	}
	for start := 1; start <= 2; start++ {
		stop := m.LegacyAgentAt("web-1", root)
		eventually(t, "the start's key record", func() bool { _, n := records(); return n == start })
		stop()
	}
	if ids, n := records(); len(ids) != n {
		t.Fatalf("%d key records under %d id(s)", n, len(ids))
	}
}

// A node that made its keys enrolled its report key with them: an agent
// whose report.nk is gone may not make another, which the fold would set
// aside with every report (the node waiting for ever, unheard). It stops
// and names the re-key. Fails when the agent starts with a new report key.
func TestALostReportKeyNamesTheRekey(t *testing.T) {
	t.Parallel()
	m := newMesh(t)
	m.Enroll("web-1")
	root := filepath.Join(t.TempDir(), "root")
	m.AgentAt("web-1", root)()
	state := agent.StateDir(root, "")
	m.Must(os.Remove(filepath.Join(state, "report.nk")))
	j, err := agent.Enrol(m.Ctx, agent.Join{Mesh: m.H.Core.Mesh, Bus: m.Srv.ClientURL(), Node: "web-1", Key: m.H.Core.PublicKey}, state,
		func(o ...nats.Option) (*nats.Conn, error) { return nats.Connect(m.Srv.ClientURL(), o...) }, slog.New(slog.DiscardHandler))
	m.Must(err)
	_, err = agent.Open(m.Ctx, embeddedtest.Conn(t, m.Srv), agent.Config{Join: j, Root: root})
	if err == nil || !strings.Contains(err.Error(), "mesh node rekey web-1") {
		t.Fatalf("an agent whose enrolled report key is gone: %v", err)
	}
	if _, err := os.Stat(filepath.Join(state, "report.nk")); err == nil {
		t.Fatal("the agent made a new report key nobody will believe")
	}
}
