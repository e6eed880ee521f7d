package agent_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/meshctl/mesh/events/store"
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
	m := newMesh(t)
	m.Enroll("web-1")
	root := filepath.Join(t.TempDir(), "root")
	records := func() (ids map[string]bool, n int) {
		ids = map[string]bool{}
		m.Must(m.H.Store.Read(m.Ctx, storeReadReports("web-1"), func(msg storeMsg) error {
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
