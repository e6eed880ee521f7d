package fleet

import (
	"context"
	"fmt"
	"testing"

	"github.com/meshctl/mesh/declaration"
	"github.com/meshctl/mesh/embedded/embeddedtest"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/events/store"
	"github.com/meshctl/mesh/projections"
	"github.com/nats-io/nkeys"
)

// The traffic mesh traffic writes is the mesh's own: a fold under the
// controller key takes every event as its rightful writer's (none set
// aside as foreign), each node's row says it applied its last declaration,
// and a second run on the same stream (a run cut short, or a longer
// stream) goes on from each node's last declaration.
func TestTrafficIsFoldedAsTheMeshsOwn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	nc := embeddedtest.Conn(t, embeddedtest.Server(t))
	st, _, err := store.Open(ctx, nc, store.StreamConfig{})
	if err != nil {
		t.Fatal(err)
	}
	kp, _ := nkeys.CreateUser()
	keys, err := declaration.NewKeyring(kp)
	if err != nil {
		t.Fatal(err)
	}
	st.MAC = keys.LogMAC()
	const nodes = 30
	// Enrolments and keys (60), then three rounds of a send and its
	// report (180); then, resumed, new keys (30) and two more rounds.
	for _, n := range []uint64{240, 150} {
		wrote, err := Traffic(ctx, nc, st, kp, TrafficConfig{Nodes: nodes, Events: n, Prefix: "t"})
		if err != nil || wrote != n {
			t.Fatalf("traffic of %d event(s): wrote %d, %v", n, wrote, err)
		}
	}
	state, err := st.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if state.Msgs != 390 {
		t.Fatalf("the stream holds %d events, not the 390 written", state.Msgs)
	}
	e, _, err := projections.Open(ctx, projections.Options{Dir: t.TempDir(), Store: st, Keys: keys})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	e.Start()
	if err := e.WaitFor(ctx, state.LastSeq); err != nil {
		t.Fatal(err)
	}
	err = e.Read(func(v *projections.View) error {
		if open, first, err := v.OpenForeign(); err != nil || open > 0 {
			return fmt.Errorf("%d foreign message(s) in the traffic, the first %+v: %v", open, first, err)
		}
		for i := range nodes {
			name := fmt.Sprintf("t-%06d", i)
			n, found, err := v.Node(name)
			if err != nil || !found || n.LastSent == nil || n.LastSent.Sequence != 5 || n.LastReport == nil ||
				n.LastReport.Outcome != events.OutcomeApplied || n.LastReport.Digest != n.LastSent.Digest {
				return fmt.Errorf("node %s after five rounds: found %v, %+v, %v", name, found, n, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
