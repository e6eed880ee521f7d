package agent_test

import (
	"github.com/meshctl/mesh/commands"
	"github.com/meshctl/mesh/embedded/embeddedtest"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/events/store"
)

type storeMsg = store.Msg

func storeRead(node string) store.ReadOptions {
	return store.ReadOptions{Filter: events.DeclarationSubject(node)}
}

func storeReadReports(node string) store.ReadOptions {
	return store.ReadOptions{Filter: events.ReportFilter(node)}
}

func storeReadAll(filter string) store.ReadOptions { return store.ReadOptions{Filter: filter} }

// eventually is embeddedtest.Eventually: the one polling helper.
var eventually = embeddedtest.Eventually

// verified folds the whole stream afresh and fails unless it equals the
// live read models (rule 17): what a test's events built, a rebuild builds.
func (m *mesh) verified() {
	m.t.Helper()
	v, err := m.h.VerifyProjections(m.ctx, commands.FoldRequest{})
	if err != nil || v.Diff != "" {
		m.t.Fatalf("a fresh fold differs from the live read models: %v\n%s", err, v.Diff)
	}
}
