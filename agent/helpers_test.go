package agent_test

import (
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

// eventually is embeddedtest.Eventually: the one polling helper.
var eventually = embeddedtest.Eventually
