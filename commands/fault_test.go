package commands_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/meshctl/mesh/commands"
	"github.com/meshctl/mesh/embedded/embeddedtest"
	"github.com/meshctl/mesh/events/store"
	"github.com/meshctl/mesh/wire"
	"github.com/nats-io/nats.go"
)

// The fault suite (go test ./commands -run Fault): the controller killed at
// random points of a push, a restore killed at random points, the stream
// leader lost mid-push (TestAPushSurvivesLosingTheStreamLeader, with the
// cluster tests), a bus at its storage limit (TestAFullBusIsSaidAndSurvived).
// After each: a fresh fold equals the live read models, no node has two
// declarations of one sequence, and the next push converges.

// The controller killed (its bus connection cut, then stopped) at 20 random
// points of a push to 250 nodes, each time started again on its home.
func TestFaultControllerKilledMidPush(t *testing.T) {
	t.Parallel() // its own bus and homes; long and partly waiting: beside the others
	if testing.Short() {
		t.Skip("pushes to 250 nodes twenty times")
	}
	ctx := context.Background()
	srv := embeddedtest.Server(t)
	home := t.TempDir()
	start := func() (*commands.Controller, *nats.Conn) { return startOn(t, srv, home) }
	ctrl, nc := start()
	// 250, not the 1,000 it was: a push appends every node's declaration
	// as a publish of its own, all in flight at once under one window of
	// 2,000, so a kill lands between any two of 250 as of 1,000; the four
	// times the nodes were four times each round's push and fold, and
	// sixteen times the rounds' rereading of a log they made grow, 20 s
	// of the package's time.
	const nodes = 250
	for i := range nodes {
		if _, err := ctrl.Nodes.Enroll(ctx, wire.EnrollRequest{CommandID: wire.NewCommandID(), Name: fmt.Sprintf("n%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	watch := embeddedtest.Conn(t, srv)
	rng := rand.New(rand.NewPCG(2026, 12))
	for round := range 20 {
		// Each round changes what every node would be sent, so the push
		// sends all of them, and is cut after a random number have landed.
		if _, err := ctrl.Modules.RegisterModule(ctx, wire.RegisterRequest{CommandID: wire.NewCommandID(), File: "m.json",
			Manifest: fmt.Sprintf(`{"module":"m%d","resources":[]}`, round)}); err != nil {
			t.Fatal(err)
		}
		at := 1 + rng.IntN(nodes)
		landed := 0
		// The push fails or waits for a fold that cannot come: the kill
		// ends it too (as the service's deadline would), so no round
		// waits out a fixed time; Settle bounds a push the kill missed.
		pctx, cancel := context.WithTimeout(ctx, embeddedtest.Settle)
		sub, err := watch.Subscribe("mesh.ev.node.*.DeclarationSent", func(*nats.Msg) {
			if landed++; landed == at {
				nc.Close()
				cancel()
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		watch.Flush()
		ctrl.Push.Push(pctx, wire.PushRequest{CommandID: wire.NewCommandID()})
		cancel()
		sub.Unsubscribe()
		ctrl.Close()
		nc.Close()
		ctrl, nc = start()
		checkAfterFault(t, ctrl)
	}
	ctrl.Close()
	nc.Close()
}

// A restore killed at random points (its input cut off mid-line), then run
// again: the partial stream is never served, the second run resumes, and
// the restored mesh is the backed-up one.
func TestFaultRestoreKilledPartWay(t *testing.T) {
	t.Parallel() // its own buses and homes: beside the others
	ctx := context.Background()
	m := newTrustMesh(t, false)
	for i := range 50 {
		_, err := m.h.Nodes.Enroll(ctx, wire.EnrollRequest{CommandID: wire.NewCommandID(), Name: fmt.Sprintf("n%d", i)})
		m.must(err)
	}
	_, err := m.h.Push.Push(ctx, wire.PushRequest{CommandID: wire.NewCommandID()})
	m.must(err)
	var backup bytes.Buffer
	manifest, err := m.h.Core.Store.Export(ctx, &backup)
	m.must(err)
	rng := rand.New(rand.NewPCG(12, 2026))
	for range 5 {
		nc := embeddedtest.Conn(t, embeddedtest.Server(t))
		st, _, err := store.Open(ctx, nc, store.StreamConfig{})
		m.must(err)
		cut := rng.IntN(backup.Len())
		if _, _, err := st.Import(ctx, manifest, bytes.NewReader(backup.Bytes()[:cut])); err == nil {
			t.Fatalf("a restore cut at byte %d of %d said it finished", cut, backup.Len())
		}
		home := t.TempDir()
		writeKey(t, m.home, home)
		if _, err := commands.StartController(ctx, nc, commands.ControllerConfig{Home: home}); err == nil {
			t.Fatalf("a controller served a restore cut at byte %d", cut)
		}
		if _, _, err := st.Import(ctx, manifest, bytes.NewReader(backup.Bytes())); err != nil {
			t.Fatalf("the restore again: %v", err)
		}
		ctrl, err := commands.StartController(ctx, nc, commands.ControllerConfig{Home: home})
		m.must(err)
		if s, _ := ctrl.Status.Status(ctx, wire.StatusRequest{}); len(s.Nodes) != 50 {
			t.Fatalf("the restored mesh has %d nodes, want 50", len(s.Nodes))
		}
		checkAfterFault(t, ctrl)
		ctrl.Close()
	}
}
