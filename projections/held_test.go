package projections

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/meshctl/mesh/compose"
	"github.com/meshctl/mesh/declaration"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/events/store"
	"github.com/nats-io/nkeys"
)

// A send and its report folded in two commits, as a push's are: the row
// the fold holds decoded between them (and after the report, for the next
// round's send), and the send handed to the fold by
// the store that appended it (store.Known), leave exactly the read models
// a fold from the start makes, round after round; a node whose report
// never came keeps its send.
func TestSendsAndReportsFoldedApartEqualAFoldFromTheStart(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	s.RememberSends = true
	e := openEngine(t, s, vfs.NewMem(), 2)
	kp, _ := nkeys.CreateUser()
	agent, err := declaration.NewSigner(kp)
	if err != nil {
		t.Fatal(err)
	}
	nodes := []string{"node-1", "node-2", "node-3"}
	version := map[string]uint64{}
	for _, n := range nodes {
		if version[n], err = s.Append(ctx, events.NodeAggregate(n), 0, "enrol-"+n, events.NodeEnrolled{Name: n, Capabilities: []string{"linux"}, Labels: map[string]string{"zone": "a"}}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Report(ctx, n, "key-"+n, events.ReportKeyRecorded{Node: n, Key: agent.PublicKey()}, store.Sealing{Signer: agent, MAC: testKeys.NodeMAC(n)}); err != nil {
			t.Fatal(err)
		}
	}
	for round := uint64(1); round <= 3; round++ {
		var items []store.One
		digests := map[string]string{}
		for _, n := range nodes {
			d := declaration.New(compose.Declaration{Mesh: "mesh", Node: n, Modules: []compose.ModuleBuild{}, Resources: []compose.Resource{}, Receives: []compose.Receipt{}}, round, "", time.Now())
			b := d.Canonical()
			digests[n] = compose.Digest(b)
			items = append(items, store.One{Aggregate: events.NodeAggregate(n), Expected: version[n], CommandID: fmt.Sprintf("push-%d-%s", round, n),
				Event: events.DeclarationSent{Node: n, Sequence: round, Digest: digests[n], ContentDigest: d.ContentDigest(), By: "push",
					Declaration: b, Signature: make([]byte, 64), Key: testKeys.Controller()}})
		}
		out, err := s.AppendMany(ctx, items)
		if err != nil {
			t.Fatal(err)
		}
		for i, o := range out {
			if o.Err != nil {
				t.Fatal(o.Err)
			}
			version[nodes[i]] = o.Seq
			waitFor(t, e, o.Seq) // each send committed alone: its row is held
		}
		// node-3 never reports on its last send.
		for _, n := range nodes[:2+min(1, 3-int(round))] {
			seq, err := s.Report(ctx, n, fmt.Sprintf("rep-%d-%s", round, n), events.DeclarationApplied{Node: n, Sequence: round, Digest: digests[n]},
				store.Sealing{Signer: agent, MAC: testKeys.NodeMAC(n)})
			if err != nil {
				t.Fatal(err)
			}
			waitFor(t, e, seq)
		}
		for _, n := range nodes {
			row, found, err := e.Node(n)
			switch {
			case err != nil || !found:
				t.Fatalf("round %d: %s not read (%v)", round, n, err)
			case row.LastSent == nil || row.LastSent.Sequence != round || row.LastSent.Digest != digests[n]:
				t.Fatalf("round %d: %s's last send %+v, want sequence %d", round, n, row.LastSent, round)
			case n == "node-3" && round == 3:
				if row.LastReport != nil && row.LastReport.Digest == digests[n] {
					t.Fatalf("round 3: node-3 reported on a send it never reported on: %+v", row.LastReport)
				}
			case row.LastReport == nil || row.LastReport.Digest != digests[n]:
				t.Fatalf("round %d: %s's last report %+v, want on %s", round, n, row.LastReport, digests[n])
			}
		}
	}
	if diff, _, err := e.Verify(ctx, nil); err != nil || diff != "" {
		t.Fatalf("verify: err %v, diff:\n%s", err, diff)
	}
}
