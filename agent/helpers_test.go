package agent_test

import (
	"testing"
	"time"

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
