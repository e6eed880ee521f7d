package projections

import (
	"context"
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/projections/scan"
)

// Every event of a node's aggregate moves the node row's Version, which a
// push expects when it appends a declaration (aggregates.Node.Version): a
// row left behind would make every later append to that node conflict,
// and the node could never be sent anything again. One sample per node
// event type the controller writes (the send is foreign: its digest is
// not that of the bytes it carries; it moves the version all the same,
// since it moved the stream's last sequence for the node); a type added
// to events.Rights without a sample here fails the test.
func TestEveryNodeEventMovesItsVersion(t *testing.T) {
	samples := []events.Event{
		events.NodeEnrolled{Name: "web-1", Capabilities: []string{}, Labels: map[string]string{}},
		events.ModuleAssigned{Node: "web-1", Module: "app", Build: "b1", Settings: map[string]string{}},
		events.DeclarationSent{Node: "web-1", Sequence: 1, Digest: "d", ContentDigest: "c", By: "push", Declaration: []byte("{}"), Signature: []byte("s"), Key: "k"},
		events.NodeChanged{Name: "web-1", Capabilities: []string{"linux"}, Labels: map[string]string{}},
		events.SecretForgotten{Node: "web-1", Module: "app", Setting: "password", Versions: []int{1}},
		events.ModuleUnassigned{Node: "web-1", Module: "app"},
		events.NodeRetired{Name: "web-1"},
	}
	covered := map[string]bool{}
	for _, ev := range samples {
		covered[ev.EventType()] = true
	}
	for name, r := range events.Rights {
		if r.Kind == events.KindNode && r.Writer == events.ByController && !covered[name] {
			t.Fatalf("%s is an event of a node's aggregate with no sample here: add one", name)
		}
	}
	s := newStore(t)
	e := openEngine(t, s, vfs.NewMem(), 1)
	var version uint64
	for _, ev := range samples {
		seq, err := s.Append(context.Background(), events.NodeAggregate("web-1"), version, "version-"+ev.EventType(), ev)
		if err != nil {
			t.Fatalf("%s: %v", ev.EventType(), err)
		}
		waitFor(t, e, seq)
		row, found, err := e.Node("web-1")
		if err != nil || !found || row.Version != seq {
			t.Fatalf("after %s at %d the node row's version is %d (%v, found %v)", ev.EventType(), seq, row.Version, err, found)
		}
		version = seq
	}
}

// The overlay's addresses read back whole past the size at which a scan
// decodes on every core (the read once filled one map from every core and
// crashed the controller).
func TestManyAddressesReadBack(t *testing.T) {
	s := newStore(t)
	e := openEngine(t, s, vfs.NewMem(), 0)
	ev := events.AddressesAllotted{}
	const n = 3 * scan.ParallelRows
	for i := range n {
		ev.Allotted = append(ev.Allotted, events.Allotment{Node: fmt.Sprintf("n-%d", i), Address: fmt.Sprintf("10.1.%d.%d", i/250, i%250+1)})
	}
	seq, err := s.Append(context.Background(), events.PoolAggregate(), 0, "allot", events.NetworkSet{CIDR: "10.1.0.0/16"}, ev)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, e, seq)
	for range 20 {
		var got map[string]string
		if err := e.Read(func(v *View) (err error) { got, err = v.NodeAddresses(); return err }); err != nil || len(got) != n || got["n-7"] != "10.1.0.8" {
			t.Fatalf("%d addresses read back (%v), n-7 at %q", len(got), err, got["n-7"])
		}
	}
}
