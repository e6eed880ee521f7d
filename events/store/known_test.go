package store_test

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/meshctl/mesh/embedded/embeddedtest"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/events/store"
)

// A send this store appended is handed back with the message when it is
// read: exactly what decoding the stored bytes answers, and the key of
// its MAC, only for the bytes this store published; one whose append
// failed is forgotten at once. A plain read only looks: what it recalls
// stays for the live fold's reader, which takes it (own.go).
func TestAReadBackSendIsWhatItsBytesDecodeTo(t *testing.T) {
	ctx := events.WithBy(context.Background(), "alice")
	s := open(t, embeddedtest.Conn(t, embeddedtest.Server(t)))
	s.MAC = []byte("the log's MAC key, 32 bytes long")
	s.RememberSends = true
	var items []store.One
	for i, n := range []string{"web-1", "web-2", "web-3"} {
		v, err := s.Append(ctx, events.NodeAggregate(n), 0, "enrol-"+n, enrolled(n))
		if err != nil {
			t.Fatal(err)
		}
		sent := events.DeclarationSent{Node: n, Sequence: 1, Digest: "ab12", ContentDigest: "cd34", By: "push", Resources: 2,
			Declaration: []byte("signed bytes of " + n), Signature: []byte{1, 2, 3}, Key: "UCONTROLLER"}
		if i == 1 {
			sent.Proof = []byte{9, 8, 7}
		}
		if i == 2 {
			v = 99 // a wrong expectation: a conflict, not stored
		}
		items = append(items, store.One{Aggregate: events.NodeAggregate(n), Expected: v, CommandID: "push-" + n, Event: sent})
	}
	out, err := s.AppendMany(ctx, items)
	if err != nil {
		t.Fatal(err)
	}
	if out[0].Err != nil || out[1].Err != nil || !errors.Is(out[2].Err, store.ErrConflict) {
		t.Fatalf("outcomes %+v, want two appended and a conflict", out)
	}
	if n := store.Remembered(s); n != 2 {
		t.Fatalf("%d sends remembered before the read, want the 2 appended (the conflict forgotten)", n)
	}
	var knowns int
	if err := s.Read(ctx, store.ReadOptions{}, func(m store.Msg) error {
		env, ev, err := events.DecodeFromSubject(m.Subject, m.Data)
		switch {
		case err != nil:
			t.Fatal(err)
		case m.Known == nil && ev.EventType() == "DeclarationSent":
			t.Errorf("%s: read back without what its store knows", m.Subject)
		case m.Known == nil:
		case ev.EventType() != "DeclarationSent":
			t.Errorf("%s: known, but only a send is remembered", m.Subject)
		default:
			knowns++
			if d := cmp.Diff(env, m.Known.Envelope); d != "" {
				t.Errorf("%s: the known envelope is not its bytes' (-decoded +known):\n%s", m.Subject, d)
			}
			if d := cmp.Diff(ev, m.Known.Event); d != "" {
				t.Errorf("%s: the known event is not its bytes' (-decoded +known):\n%s", m.Subject, d)
			}
			if string(m.Known.MACKey) != string(s.MAC) {
				t.Errorf("%s: known under MAC key %q, want the store's", m.Subject, m.Known.MACKey)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if knowns != 2 || store.Remembered(s) != 2 {
		t.Fatalf("%d sends known on reading, %d still remembered; want 2 and 2", knowns, store.Remembered(s))
	}
}

// A store that is not told to remember (a client's, a tool's, whose
// appends no fold reads back) keeps nothing.
func TestAStoreRemembersOnlyWhenTold(t *testing.T) {
	ctx := context.Background()
	s := open(t, embeddedtest.Conn(t, embeddedtest.Server(t)))
	s.MAC = []byte("the log's MAC key, 32 bytes long")
	v, err := s.Append(ctx, events.NodeAggregate("web-1"), 0, "enrol", enrolled("web-1"))
	if err != nil {
		t.Fatal(err)
	}
	sent := events.DeclarationSent{Node: "web-1", Sequence: 1, Digest: "ab12", By: "push", Declaration: []byte("x"), Key: "UCONTROLLER"}
	if _, err := s.AppendMany(ctx, []store.One{{Aggregate: events.NodeAggregate("web-1"), Expected: v, CommandID: "push", Event: sent}}); err != nil {
		t.Fatal(err)
	}
	if n := store.Remembered(s); n != 0 {
		t.Fatalf("%d sends remembered, want none", n)
	}
}
