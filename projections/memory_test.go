package projections

import (
	"bytes"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/meshctl/mesh/events"
)

// TestTheFoldRemembersRowsEncoded holds the fold's memory of node rows to
// their encoded form between commits: decoded, 100,000 rows were 110-150
// MB of the controller's live heap (issue 34's 700 MiB bound). Only the
// rows a batch touched are decoded, and only until its commit; what is
// remembered is exactly what Pebble holds, and a later event folds from it.
func TestTheFoldRemembersRowsEncoded(t *testing.T) {
	db, err := pebble.Open("", &pebble.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	f := (&Engine{o: Options{BatchSize: DefaultBatchSize}}).newFolder(db, nil)
	defer f.discard()
	at := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	seq := uint64(0)
	apply := func(agg events.AggregateID, ev events.Event) {
		t.Helper()
		seq++
		rec := events.Recorded{Seq: seq, Subject: agg.Subject(ev.EventType()), Event: ev, Stored: at}
		rec.Envelope.Aggregate, rec.Envelope.OccurredAt = agg, at
		if err := f.Apply(rec, nil, 0); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"web-1", "web-2"} {
		apply(events.NodeAggregate(name), events.NodeEnrolled{Name: name, Capabilities: []string{"linux"}, Labels: map[string]string{"zone": "eu-1"}})
	}
	if err := f.Commit(); err != nil {
		t.Fatal(err)
	}
	if len(f.nodes) != 0 || len(f.rows) != 2 {
		t.Fatalf("after a commit the fold holds %d decoded rows and %d encoded, want 0 and 2", len(f.nodes), len(f.rows))
	}
	for name, row := range f.rows {
		stored, closer, err := db.Get(nodeKey(name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(stored, row) {
			t.Errorf("the fold remembers %s's row as %x, Pebble holds %x", name, row, stored)
		}
		if cap(row) > len(row)+8 {
			t.Errorf("%s's remembered row holds room for %d bytes, %d used: each row is kept at its size", name, cap(row), len(row))
		}
		closer.Close()
	}
	// A send folds from the remembered row, decoded for its batch alone.
	apply(events.NodeAggregate("web-1"), events.DeclarationSent{Node: "web-1", Sequence: 1, Digest: "d1", ContentDigest: "c1", By: "push", Declaration: []byte("{}"), Signature: []byte("s"), Key: "k"})
	if len(f.nodes) != 1 {
		t.Fatalf("a batch that touched one row holds %d decoded", len(f.nodes))
	}
	if err := f.Commit(); err != nil {
		t.Fatal(err)
	}
	n, found, err := getNode(db, "web-1")
	if err != nil || !found || n.LastSent == nil || n.LastSent.Digest != "d1" || n.Labels["zone"] != "eu-1" || n.Version != seq {
		t.Fatalf("web-1's row after its send: %+v (found %v, %v)", n, found, err)
	}
	if len(f.nodes) != 0 || !bytes.Equal(f.rows["web-1"], storedRow(t, db, "web-1")) {
		t.Fatal("after the send's commit the fold does not remember web-1's row as Pebble holds it")
	}
}

func storedRow(t *testing.T, db *pebble.DB, name string) []byte {
	t.Helper()
	v, closer, err := db.Get(nodeKey(name))
	if err != nil {
		t.Fatal(err)
	}
	defer closer.Close()
	return bytes.Clone(v)
}
