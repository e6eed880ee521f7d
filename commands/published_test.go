package commands_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/meshctl/mesh/aggregates"
	"github.com/meshctl/mesh/commands"
	"github.com/meshctl/mesh/commands/commandstest"
	"github.com/meshctl/mesh/embedded/embeddedtest"
	"github.com/meshctl/mesh/wire"
)

// A controller in a new home (a new machine given the controller key, a
// home lost) starts from the snapshot of the read models another
// controller of the mesh published to the bus, folds only the tail, says
// so, and serves read models that verify against a fold from the first
// event (issue 34).
func TestANewControllerStartsFromThePublishedSnapshot(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := embeddedtest.Server(t)
	first := t.TempDir()
	a, err := commands.StartController(ctx, embeddedtest.Conn(t, srv), commands.ControllerConfig{Home: first, PublishEvery: 20})
	if err != nil {
		t.Fatal(err)
	}
	batch := func(from int) {
		var nodes []wire.EnrollRequest
		for i := from; i < from+20; i++ {
			nodes = append(nodes, wire.EnrollRequest{Name: fmt.Sprintf("web-%d", i), Capabilities: []string{"linux"}})
		}
		if _, err := a.Nodes.EnrollBatch(ctx, wire.EnrollBatchRequest{CommandID: wire.NewCommandID(), Nodes: nodes}); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 60; i += 20 {
		batch(i)
	}
	embeddedtest.Eventually(t, "a snapshot and its brief one on the bus", func() bool {
		on, err := a.Store.Snapshots(ctx)
		briefs, berr := a.Store.Briefs(ctx)
		return err == nil && berr == nil && len(on) > 0 && len(briefs) > 0 && briefs[len(briefs)-1].Checkpoint == on[len(on)-1].Checkpoint
	})
	batch(5000) // the tail, after the snapshot
	a.Close()

	second := t.TempDir()
	commandstest.WriteKey(t, first, second)
	var log embeddedtest.LockedBuffer
	b, err := commands.StartController(ctx, embeddedtest.Conn(t, srv), commands.ControllerConfig{Home: second, PublishEvery: -1, Log: slog.New(slog.NewTextHandler(&log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if !strings.Contains(log.String(), "starting from the snapshot on the bus") {
		t.Fatalf("a controller with no read models and a snapshot on the bus did not start from it:\n%s", log.String())
	}
	// An operator timing a start reads the fetch's share apart from the tail's.
	if !strings.Contains(log.String(), "fetched_in=") {
		t.Fatalf("the start from the snapshot does not say how long its fetch took:\n%s", log.String())
	}
	s, err := b.Status.Status(ctx, wire.StatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Nodes) < 40 {
		t.Fatalf("the controller from the snapshot and the tail has %d nodes, at least 40 enrolled", len(s.Nodes))
	}
	// It started from the brief snapshot (without the history index):
	// history answers that it is not here yet, and no other way, until
	// the index is filled in from the whole one.
	if !strings.Contains(log.String(), "brief=true") {
		t.Fatalf("the controller did not start from the brief snapshot:\n%s", log.String())
	}
	embeddedtest.Eventually(t, "history answered once the index is filled in", func() bool {
		_, err := b.History.History(ctx, wire.HistoryRequest{Node: "web-1"})
		if err != nil && !errors.Is(err, aggregates.ErrNotYet) {
			t.Fatalf("history while the index is filled in: %v", err)
		}
		return err == nil
	})
	// Said once the marker is gone, which history sees first.
	embeddedtest.Eventually(t, "the controller saying its history index is whole", func() bool {
		return strings.Contains(log.String(), "the history index is whole")
	})
	commandstest.CheckAfterFault(t, b)
}
