package history

import (
	"context"
	"strings"
	"testing"

	"github.com/meshctl/mesh/commands/core/coretest"
	"github.com/meshctl/mesh/declaration"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/wire"
)

// sendTo publishes app-1's enrolment and one declaration of content into m.
func sendTo(m *coretest.Mesh, content string) {
	signer, _ := declaration.NewSigner(m.Key)
	m.Publish(events.NodeAggregate("app-1"), events.NodeEnrolled{Name: "app-1"})
	m.Send(signer, "app-1", 1, "", content)
}

// History answers from its index, and reads the log only for --diff: a row
// the log does not bear out (here, the index of one stream over the log of
// another) is an error naming the remedy, never an answer.
func TestHistoryRefusesARowTheLogDoesNotBearOut(t *testing.T) {
	ctx := context.Background()
	indexed := coretest.New(t, false)
	sendTo(indexed, "x = 1\n")
	h := New(indexed.Fold())
	if hist, err := h.History(ctx, wire.HistoryRequest{Node: "app-1", Diff: true}); err != nil || len(hist.Entries) != 1 || len(hist.Entries[0].Changes) != 1 {
		t.Fatalf("history over its own log: %+v %v", hist, err)
	}
	other := coretest.New(t, false)
	sendTo(other, "x = 2\n")
	<-other.JS.PublishAsyncComplete()
	h.Store = other.Store
	if _, err := h.History(ctx, wire.HistoryRequest{Node: "app-1", Diff: true}); err == nil || !strings.Contains(err.Error(), "mesh projections verify") {
		t.Fatalf("history --diff over another log: %v", err)
	}
}
