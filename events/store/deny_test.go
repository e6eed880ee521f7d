package store_test

import (
	"context"
	"testing"

	"github.com/meshctl/mesh/embedded/embeddedtest"
	"github.com/meshctl/mesh/events"
	"github.com/nats-io/nats.go/jetstream"
)

// Rule 17: the stream is not disposable. Whoever reaches it cannot purge
// it, delete or erase a message of it, or lift those denials.
func TestTheStreamDeniesDeleteAndPurge(t *testing.T) {
	ctx := context.Background()
	nc := embeddedtest.Conn(t, embeddedtest.Server(t))
	s := open(t, nc)
	seq, err := s.Append(ctx, events.NodeAggregate("web-1"), 0, "cmd-1", enrolled("web-1"))
	if err != nil {
		t.Fatal(err)
	}
	js, _ := jetstream.New(nc)
	st, err := js.Stream(ctx, events.Stream)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Purge(ctx); err == nil {
		t.Error("the stream was purged")
	}
	if err := st.DeleteMsg(ctx, seq); err == nil {
		t.Error("an event was deleted")
	}
	if err := st.SecureDeleteMsg(ctx, seq); err == nil {
		t.Error("an event was erased")
	}
	if _, err := st.GetMsg(ctx, seq); err != nil {
		t.Fatalf("the event is gone after the refused deletes: %v", err)
	}

	// Nor can it be loosened: the server refuses to lift either denial
	// once set, so the stream stays closed whatever a later start asserts.
	cfg := st.CachedInfo().Config
	cfg.DenyDelete, cfg.DenyPurge = false, false
	if _, err := js.UpdateStream(ctx, cfg); err == nil {
		t.Error("the stream's denials were lifted")
	}
	if info, err := st.Info(ctx); err != nil || info.State.Msgs != 1 {
		t.Fatalf("the stream after the refused purge, deletes and update: %+v %v", info, err)
	}
}
