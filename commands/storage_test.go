package commands_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/meshctl/mesh/commands"
	"github.com/meshctl/mesh/embedded"
	"github.com/meshctl/mesh/embedded/embeddedtest"
	"github.com/meshctl/mesh/events/store"
	"github.com/meshctl/mesh/wire"
	"github.com/nats-io/nats.go/jetstream"
)

// Storage trouble is said and survived (issue 12): a bus at its storage
// limit (a real JetStream limit on a real server, filled by another
// stream) refuses to store; every write answers with one sentence naming
// the cause and saying nothing was recorded, reads go on answering, and
// once there is room again the same command succeeds, without a restart.
func TestAFullBusIsSaidAndSurvived(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const limit = 8 << 20
	srv, err := embedded.Start(ctx, embedded.Options{Dir: t.TempDir(), Port: -1, MaxStore: limit})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	nc, err := srv.Connect()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	ctrl, err := commands.StartController(ctx, nc, commands.ControllerConfig{Home: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer ctrl.Close()
	h := ctrl
	if _, err := h.Nodes.Enroll(ctx, wire.EnrollRequest{CommandID: wire.NewCommandID(), Name: "web-1"}); err != nil {
		t.Fatal(err)
	}
	// Another stream takes the rest of the bus's storage.
	js, _ := jetstream.New(nc)
	_, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: "FILL", Subjects: []string{"fill.>"}, Storage: jetstream.FileStorage})
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 256<<10)
	for i := 0; ; i++ {
		if _, err := js.Publish(ctx, fmt.Sprintf("fill.%d", i), chunk); err != nil {
			break
		}
		if i > 4*limit/len(chunk) {
			t.Fatal("the bus stored past its limit")
		}
	}

	_, err = h.Nodes.Enroll(ctx, wire.EnrollRequest{CommandID: wire.NewCommandID(), Name: "web-2"})
	if !errors.Is(err, store.ErrStorage) || !strings.Contains(err.Error(), "nothing was recorded") || strings.Count(err.Error(), "cannot append") != 1 {
		t.Fatalf("enrol on a full bus: %v", err)
	}
	// A push names each node it could not send to, with the cause: the
	// command line then exits 1 saying how many were not sent.
	if r, err := h.Push.Push(ctx, wire.PushRequest{CommandID: wire.NewCommandID(), Node: "web-1"}); err != nil || len(r.Sent) != 0 ||
		len(r.Unsent) != 1 || !strings.Contains(r.Unsent[0].Reason, "storage is full") {
		t.Fatalf("a push on a full bus: %+v %v", r, err)
	}
	if s, err := h.Status.Status(ctx, wire.StatusRequest{}); err != nil || len(s.Nodes) != 1 {
		t.Fatalf("status on a full bus: %+v %v", s, err)
	}

	// Room again: the same command succeeds, the controller never restarted.
	if err := js.DeleteStream(ctx, "FILL"); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Nodes.Enroll(ctx, wire.EnrollRequest{CommandID: wire.NewCommandID(), Name: "web-2"}); err != nil {
		t.Fatalf("enrol once there is room again: %v", err)
	}
}

// A bus that lost its data (its directory removed) is not quietly a new,
// empty mesh: a controller whose home's read models were folded from a
// stream the bus no longer has refuses to start, saying what happened and
// what to do; with Reset (mesh up --rebuild) it begins an empty mesh.
func TestALostStreamIsNotServedAsAnEmptyMesh(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	home := t.TempDir()
	first := embeddedtest.Server(t)
	ctrl, err := commands.StartController(ctx, embeddedtest.Conn(t, first), commands.ControllerConfig{Home: home})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ctrl.Nodes.Enroll(ctx, wire.EnrollRequest{CommandID: wire.NewCommandID(), Name: "web-1"}); err != nil {
		t.Fatal(err)
	}
	ctrl.Close()

	lost := embeddedtest.Conn(t, embeddedtest.Server(t)) // a bus with none of that data
	_, err = commands.StartController(ctx, lost, commands.ControllerConfig{Home: home})
	if err == nil || !strings.Contains(err.Error(), "the bus has no stream MESH, but this home's read models were folded from stream MESH") ||
		!strings.Contains(err.Error(), "--rebuild") {
		t.Fatalf("a start on a bus that lost the stream: %v", err)
	}
	if exists, _ := store.Exists(ctx, lost, "MESH"); exists {
		t.Fatal("the refused start created a stream")
	}
	again, err := commands.StartController(ctx, lost, commands.ControllerConfig{Home: home, Reset: true})
	if err != nil {
		t.Fatalf("a start with --rebuild: %v", err)
	}
	defer again.Close()
	if s, _ := again.Status.Status(ctx, wire.StatusRequest{}); len(s.Nodes) != 0 {
		t.Fatalf("the new mesh: %+v", s)
	}
}
