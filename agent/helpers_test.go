package agent_test

import (
	"testing"
	"time"

	"github.com/meshctl/mesh/commands"
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

// eventually polls cond until it holds, failing the test after settle with
// what it waited for. It bounds a wait; it orders nothing.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(settle)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %s, still waiting for %s", settle, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// verified folds the whole stream afresh and fails unless it equals the
// live read models (rule 17): what a test's events built, a rebuild builds.
func (m *mesh) verified() {
	m.t.Helper()
	v, err := m.h.VerifyProjections(m.ctx, commands.FoldRequest{})
	if err != nil || v.Diff != "" {
		m.t.Fatalf("a fresh fold differs from the live read models: %v\n%s", err, v.Diff)
	}
}
