package embeddedtest_test

import (
	"testing"
	"time"

	"github.com/meshctl/mesh/embedded/embeddedtest"
	"github.com/nats-io/nats.go"
)

// What the bus sends after Hold never reaches the client: the messages
// are routed to it, and the link is dropped with them held. The client's
// read loop has handled all it was given once it hears the link go, so
// the count then is final. Fails when Hold only stops the next read and
// lets the one already waiting on the bus through.
func TestHoldKeepsWhatTheBusSendsAfterIt(t *testing.T) {
	srv := embeddedtest.Server(t)
	nc, cut := embeddedtest.ConnCut(t, srv)
	gone := nc.StatusChanged(nats.RECONNECTING)
	// Synchronous: the read loop itself queues what it hears.
	sub, err := nc.SubscribeSync("held")
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	cut.Hold()
	pub := embeddedtest.Conn(t, srv)
	for range 3 {
		if err := pub.Publish("held", []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	// The bus has routed them to the held client once it answers this.
	if err := pub.Flush(); err != nil {
		t.Fatal(err)
	}
	cut.Drop()
	select {
	case <-gone:
	case <-time.After(embeddedtest.Settle):
		t.Fatalf("after %s the client had not heard its link go", embeddedtest.Settle)
	}
	if n, _, err := sub.Pending(); err != nil || n != 0 {
		t.Fatalf("%d message(s) the bus sent after Hold reached the client (%v)", n, err)
	}
}
