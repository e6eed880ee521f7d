package credentials_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/meshctl/mesh/commands"
	"github.com/meshctl/mesh/commands/commandstest"
	"github.com/meshctl/mesh/embedded/embeddedtest"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/events/store"
	"github.com/meshctl/mesh/wire"
	"github.com/nats-io/nats.go"
)

// Rule 7 under faults: the controller killed (its bus connection cut, then
// stopped) at random points of a rotation to 201 ends, each time started
// again on its home. Whatever landed, every rotation in the log has a
// declaration for each of its ends from the same command, and no end was
// sent a rotated declaration without its rotation. Fails when a rotation's
// events are written in more than one batch.
func TestFaultControllerKilledMidRotation(t *testing.T) {
	t.Parallel() // its own bus and homes; long and partly waiting: beside the others
	ctx := context.Background()
	srv := embeddedtest.Server(t)
	home := t.TempDir()
	start := func() (*commands.Controller, *nats.Conn) { return commandstest.StartOn(t, srv, home) }
	ctrl, nc := start()
	h := ctrl
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"postgres.json", "app.json"} {
		data, err := os.ReadFile("../../examples/" + f)
		must(err)
		_, err = h.Modules.RegisterModule(ctx, wire.RegisterRequest{CommandID: wire.NewCommandID(), File: f, Manifest: string(data)})
		must(err)
	}
	const consumers = 200
	batch := wire.EnrollBatchRequest{CommandID: wire.NewCommandID(), Nodes: []wire.EnrollRequest{{Name: "db", Capabilities: []string{"linux"}}}}
	var apps []string
	for i := range consumers {
		apps = append(apps, fmt.Sprintf("a%d", i))
		batch.Nodes = append(batch.Nodes, wire.EnrollRequest{Name: apps[i], Capabilities: []string{"linux"}})
	}
	_, err := h.Nodes.EnrollBatch(ctx, batch)
	must(err)
	_, err = h.Nodes.Assign(ctx, wire.AssignRequest{CommandID: wire.NewCommandID(), Node: "db", Module: "postgres", Settings: map[string]string{"password": "pw"}})
	must(err)
	_, err = h.Nodes.AssignBatch(ctx, wire.AssignBatchRequest{CommandID: wire.NewCommandID(), Module: "app", Nodes: apps})
	must(err)

	watch := embeddedtest.Conn(t, srv)
	rng := rand.New(rand.NewPCG(7, 2026))
	for range 12 {
		// Cut after a random number of the batch's messages reached the
		// bus (a subscriber sees each as it is staged, before the commit).
		at := 1 + rng.IntN(consumers+2)
		seen := 0
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		sub, err := watch.Subscribe(events.EventPrefix+".>", func(*nats.Msg) {
			if seen++; seen == at {
				srv.Kick(nc) // from the server's side: what is in flight is lost
				nc.Close()
				// The kill ends the rotation's wait too, as the service's
				// deadline would: a round no longer waits out its 2 s
				// for a fold that cannot come (10 s of 14 s on a loaded box).
				cancel()
			}
		})
		must(err)
		must(watch.Flush())
		ctrl.Credentials.Rotate(rctx, wire.RotateRequest{CommandID: wire.NewCommandID(), Provider: "postgres", Consumer: "app"})
		cancel()
		must(sub.Unsubscribe())
		ctrl.Close()
		nc.Close()
		ctrl, nc = start()
		checkRotations(t, ctrl, consumers+1)
	}
	// And a rotation not cut lands whole.
	r, err := ctrl.Credentials.Rotate(ctx, wire.RotateRequest{CommandID: wire.NewCommandID(), Provider: "postgres", Consumer: "app"})
	must(err)
	if len(r.Sent) != consumers+1 {
		t.Fatalf("a whole rotation sent %d ends, not %d", len(r.Sent), consumers+1)
	}
	// How many of the cuts came before a commit depends on timing (10 to
	// 11 of 13 landed in runs here): said, not asserted.
	t.Logf("%d of 13 rotations landed", checkRotations(t, ctrl, consumers+1))
	commandstest.CheckAfterFault(t, ctrl)
	ctrl.Close()
	nc.Close()
}

// checkRotations holds the log to rule 7: each rotation and the rotated
// declarations of its ends were written by one command, all or none. A
// batch whose commit the bus took before the cut may still be being
// stored when the restarted controller reads (a reader sees a batch's
// messages as each is stored, and a read ends where the stream ended
// when it asked): so the log is read until it holds, and a batch that
// stays partial fails the test after embeddedtest.Settle.
func checkRotations(t *testing.T, h *commands.Controller, ends int) int {
	t.Helper()
	var landed int
	var last string
	embeddedtest.Eventually(t, "every rotation in the log to name exactly the ends its command sent (rule 7)", func() bool {
		n, problem := readRotations(t, h, ends)
		if problem != "" && problem != last {
			t.Log(problem)
		}
		landed, last = n, problem
		return problem == ""
	})
	return landed
}

// readRotations reads the whole log once: the rotations it holds, and what
// breaks rule 7 in it ("" for nothing).
func readRotations(t *testing.T, h *commands.Controller, ends int) (int, string) {
	t.Helper()
	rotations := map[string][]string{} // command id -> ends it names
	sent := map[string][]string{}      // command id -> nodes sent by "rotate"
	err := h.Core.Store.Read(context.Background(), store.ReadOptions{}, func(m store.Msg) error {
		env, ev, err := events.Decode(m.Data) // the whole envelope: the fold's reading has no command id
		if err != nil {
			return fmt.Errorf("event %d: %w", m.Seq, err)
		}
		switch e := ev.(type) {
		case events.CredentialRotated:
			rotations[env.CommandID] = e.Ends
		case events.DeclarationSent:
			if e.By == "rotate" {
				sent[env.CommandID] = append(sent[env.CommandID], e.Node)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for id, nodes := range sent {
		want, ok := rotations[id]
		slices.Sort(nodes)
		if !ok || !slices.Equal(nodes, want) {
			return 0, fmt.Sprintf("command %s sent %d rotated declarations, and its rotation names %d ends (recorded: %v)", id, len(nodes), len(want), ok)
		}
	}
	for id, want := range rotations {
		if len(want) != ends || len(sent[id]) != len(want) {
			return 0, fmt.Sprintf("rotation %s names %d ends and %d were sent, of %d", id, len(want), len(sent[id]), ends)
		}
	}
	return len(rotations), ""
}
