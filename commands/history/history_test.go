package history

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/meshctl/mesh/commands/core/coretest"
	"github.com/meshctl/mesh/compose"
	"github.com/meshctl/mesh/declaration"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/wire"
)

// sendTo publishes app-1's enrolment and one declaration of content into m.
func sendTo(m *coretest.Mesh, content string) {
	signer, _ := declaration.NewSigner(m.Key)
	m.Publish(events.NodeAggregate("app-1"), events.NodeEnrolled{Name: "app-1"})
	d := declaration.New(compose.Declaration{Mesh: "mesh", Node: "app-1", Modules: []compose.ModuleBuild{},
		Resources: []compose.Resource{{Path: "/etc/app.conf", Kind: "file", Mode: "0644", Content: &content, Module: "app"}},
		Receives:  []compose.Receipt{}}, 1, "", time.Now())
	s := signer.Seal(d)
	m.Publish(events.NodeAggregate("app-1"), events.DeclarationSent{Node: "app-1", Sequence: 1, Digest: s.Digest(),
		ContentDigest: d.ContentDigest(), By: "push", Resources: 1, Declaration: s.Bytes, Signature: s.Signature, Key: s.Key})
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
