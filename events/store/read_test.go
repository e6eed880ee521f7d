package store_test

import (
	"bytes"
	"context"
	"sync/atomic"
	"testing"

	"github.com/meshctl/mesh/embedded/embeddedtest"
	"github.com/meshctl/mesh/events/store"
	"github.com/nats-io/nats.go"
)

// A read of a stream of large messages keeps its connection (issue 29): a
// node that filled its reports with 60 KB of junk made the controller's
// reads ask for 5,000 messages at a time, 300 MB, past what the bus holds
// for one connection; the bus cut the controller as a slow consumer, its
// service went with it, and every projections verify failed. Fails when a
// read asks for more than a connection may hold.
func TestAReadOfLargeMessagesKeepsItsConnection(t *testing.T) {
	ctx := context.Background()
	srv := embeddedtest.Server(t)
	var cut atomic.Int32
	nc, err := srv.Connect(nats.DisconnectErrHandler(func(*nats.Conn, error) { cut.Add(1) }),
		nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) { cut.Add(1) }))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	s := open(t, nc)
	junk := bytes.Repeat([]byte("x"), 60<<10)
	const n = 2_000 // 120 MB, two of the bus's 64 MB a connection
	pub := embeddedtest.Conn(t, srv)
	for range n {
		if err := pub.Publish("mesh.rp.web-1.DeclarationApplied", junk); err != nil {
			t.Fatal(err)
		}
	}
	if err := pub.Flush(); err != nil {
		t.Fatal(err)
	}
	embeddedtest.Eventually(t, "the stream to hold every message", func() bool {
		st, err := s.State(ctx)
		return err == nil && st.LastSeq == n
	})
	read := 0
	err = s.Read(ctx, store.ReadOptions{}, func(store.Msg) error { read++; return nil })
	if err != nil || read != n {
		t.Fatalf("read %d of %d: %v", read, n, err)
	}
	if c := cut.Load(); c != 0 || !nc.IsConnected() {
		t.Fatalf("the reader's connection was cut or slow %d time(s) reading %d messages of 60 KB", c, n)
	}
}
