package status

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/meshctl/mesh/commands/core"
	"github.com/meshctl/mesh/commands/core/coretest"
	"github.com/meshctl/mesh/declaration"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/projections"
	"github.com/meshctl/mesh/wire"
)

// Rule 14: status never calls a sick mesh well. Read models that have not
// folded the stream (here: opened, never started, as a controller whose
// fold is stuck would hold them) answer not well, saying how far behind,
// once the oldest event not folded is older than a moment; node show says
// the same.
func TestStatusNamesAFoldBehindTheStream(t *testing.T) {
	ctx := context.Background()
	bm := coretest.New(t, false)
	bm.Publish(events.NodeAggregate("web-1"), events.NodeEnrolled{Name: "web-1"})
	bm.Publish(events.NodeAggregate("web-2"), events.NodeEnrolled{Name: "web-2"})
	<-bm.JS.PublishAsyncComplete()
	proj, _, err := projections.Open(ctx, projections.Options{Dir: t.TempDir(), Store: bm.Store, Keys: bm.Keys})
	if err != nil {
		t.Fatal(err)
	}
	defer proj.Close()
	signer, _ := declaration.NewSigner(bm.Key)
	now := time.Now()
	h := Over(&core.Core{Self: core.Self{Store: bm.Store, Log: slog.New(slog.DiscardHandler), Mesh: "mesh", Key: bm.Key, Signer: signer,
		PublicKey: signer.PublicKey(), Keys: bm.Keys}, Proj: proj, Now: func() time.Time { return now }})
	s, err := h.Status(ctx, wire.StatusRequest{})
	if err != nil || !s.Well || len(s.Causes) != 0 {
		t.Fatalf("a moment behind is not yet a cause: %+v %v", s, err)
	}
	now = now.Add(time.Minute)
	s, err = h.Status(ctx, wire.StatusRequest{})
	if err != nil || s.Well || len(s.Causes) != 1 || !strings.Contains(s.Causes[0], "2 event(s) behind the stream") {
		t.Fatalf("status over read models a minute behind: %+v %v", s, err)
	}
	proj.Start()
	if err := proj.WaitFor(ctx, 2); err != nil {
		t.Fatal(err)
	}
	n, err := h.ShowNode(ctx, wire.NameRequest{Name: "web-1"})
	if err != nil || len(n.Causes) != 0 {
		t.Fatalf("node show once folded: %+v %v", n.Causes, err)
	}
	if s, err = h.Status(ctx, wire.StatusRequest{}); err != nil || len(s.Causes) != 0 {
		t.Fatalf("status once folded: %+v %v", s.Causes, err)
	}
}
