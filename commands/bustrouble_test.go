package commands_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/meshctl/mesh/client"
	"github.com/meshctl/mesh/commands"
	"github.com/meshctl/mesh/commands/core"
	"github.com/meshctl/mesh/embedded"
	"github.com/meshctl/mesh/embedded/embeddedtest"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// causeWith is the first of status's causes that holds part ("" for none).
func causeWith(t *testing.T, h *commands.Controller, part string) (string, bool) {
	t.Helper()
	s, err := h.Status.Status(context.Background(), wire.StatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(s.Causes, func(c string) bool { return strings.Contains(c, part) })
	if i < 0 {
		return "", s.Well
	}
	return s.Causes[i], s.Well
}

// The bus's data directory removed under a running mesh up (issue 28): the
// real KeepStorage sees it, status is not well and says so in its own
// sentence (not "storage is full"), and a write is refused with it.
func TestStatusNamesARemovedBusDirectory(t *testing.T) {
	t.Parallel() // its own bus; mostly waiting for the bus to notice: beside the others
	ctx := context.Background()
	dir := t.TempDir()
	srv := embeddedtest.ServerIn(t, dir)
	ctrl, err := commands.StartController(ctx, embeddedtest.Conn(t, srv), commands.ControllerConfig{Home: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer ctrl.Close()
	h := ctrl
	if _, err := h.Nodes.Enroll(ctx, wire.EnrollRequest{CommandID: wire.NewCommandID(), Name: "web-1"}); err != nil {
		t.Fatal(err)
	}
	watch, stop := context.WithCancel(ctx)
	defer stop()
	go srv.KeepStorage(watch, slog.New(slog.DiscardHandler), h.Core.SetBusTrouble)
	if err := os.RemoveAll(filepath.Join(dir, "jetstream")); err != nil {
		t.Fatal(err)
	}
	var cause string
	var well bool
	embeddedtest.Eventually(t, "status to name the removed directory", func() bool {
		cause, well = causeWith(t, h, "data directory was removed")
		return cause != ""
	})
	if well || strings.Contains(cause, "storage is full") {
		t.Fatalf("status of a removed bus directory: well %v, %q", well, cause)
	}
	_, err = h.Nodes.Enroll(ctx, wire.EnrollRequest{CommandID: wire.NewCommandID(), Name: "web-2"})
	if !errors.Is(err, core.ErrBusDown) || !errors.Is(err, embedded.ErrDataGone) || strings.Contains(err.Error(), "storage is full") {
		t.Fatalf("a write with the bus directory removed: %v", err)
	}
}

// A failed disk write (what KeepStorage says of a full disk) names the
// disk in status; once the bus takes events again, status is well again.
func TestStatusNamesAFailedDiskAndItsRecovery(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ctrl, err := commands.StartController(ctx, embeddedtest.Conn(t, embeddedtest.Server(t)), commands.ControllerConfig{Home: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer ctrl.Close()
	h := ctrl
	h.Core.SetBusTrouble(embedded.ErrStorageFailed)
	if cause, well := causeWith(t, h, "disk"); well || cause == "" {
		t.Fatalf("status with the bus's disk failing: well %v, cause %q", well, cause)
	}
	h.Core.SetBusTrouble(nil)
	if s, err := h.Status.Status(ctx, wire.StatusRequest{}); err != nil || !s.Well {
		t.Fatalf("status once the bus takes events again: %+v %v", s, err)
	}
}

// The stream removed under a running controller: status is not well and
// names the stream it lost.
func TestStatusNamesALostStream(t *testing.T) {
	t.Parallel() // its own bus; mostly waiting for the bus to notice: beside the others
	ctx := context.Background()
	nc := embeddedtest.Conn(t, embeddedtest.Server(t))
	ctrl, err := commands.StartController(ctx, nc, commands.ControllerConfig{Home: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer ctrl.Close()
	js, _ := jetstream.New(nc)
	if err := js.DeleteStream(ctx, events.Stream); err != nil {
		t.Fatal(err)
	}
	if cause, well := causeWith(t, ctrl, "no longer has the stream "+events.Stream); well || cause == "" || !strings.Contains(cause, "mesh restore") {
		t.Fatalf("status with the stream lost: well %v, cause %q", well, cause)
	}
}

// A write waiting on an acknowledgement the bus will not give (a stream
// that no longer takes its subject, with a listener there, so the publish
// is neither stored nor refused) is cut as soon as mesh up says the bus
// takes no events: the client's outcome is unknown, with the cause and
// what the log holds, not its whole timeout (issue 28).
func TestAWriteInFlightIsCutWhenTheBusFails(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := embeddedtest.Server(t)
	nc := embeddedtest.Conn(t, srv)
	ctrl, err := commands.StartController(ctx, nc, commands.ControllerConfig{Home: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer ctrl.Close()
	js, _ := jetstream.New(nc)
	st, err := js.Stream(ctx, events.Stream)
	if err != nil {
		t.Fatal(err)
	}
	cfg := st.CachedInfo().Config
	cfg.Subjects = []string{events.SubjectsReports}
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	listener := embeddedtest.Conn(t, srv)
	published := make(chan *nats.Msg, 16)
	if _, err := listener.ChanSubscribe(events.SubjectsEvents, published); err != nil {
		t.Fatal(err)
	}
	if err := listener.Flush(); err != nil {
		t.Fatal(err)
	}
	go func() {
		<-published // the enrolment is on the bus, waiting for its ack
		ctrl.Core.SetBusTrouble(embedded.ErrStorageFailed)
	}()
	c := &client.Client{NC: embeddedtest.Conn(t, srv), Where: srv.ClientURL(), Timeout: embeddedtest.Settle}
	err = c.Call(ctx, wire.SubjectNodeEnroll, wire.EnrollRequest{CommandID: wire.NewCommandID(), Name: "web-1"}, &wire.Changed{})
	if !errors.Is(err, client.ErrUnknownOutcome) || !strings.Contains(err.Error(), embedded.ErrStorageFailed.Error()) ||
		!strings.Contains(err.Error(), "nothing has landed in the log since the request") {
		t.Fatalf("an enrolment in flight when the bus failed: %v", err)
	}
}
