package wire_test

import (
	"bytes"
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/meshctl/mesh/embedded/embeddedtest"
	"github.com/meshctl/mesh/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
)

// Both halves of the chunk protocol live in this package; this holds them
// to each other: an answer several times the bus's max payload goes out in
// pieces by Respond and comes back whole, in order, by Assemble, and a
// small one goes as one message.
func TestAnAnswerLargerThanAMessageComesBackWhole(t *testing.T) {
	nc := embeddedtest.Conn(t, embeddedtest.Server(t))
	large := bytes.Repeat([]byte("0123456789abcdef"), int(nc.MaxPayload())/16*3+5)
	for name, answer := range map[string][]byte{"large": large, "small": []byte(`{"ok":true}`)} {
		t.Run(name, func(t *testing.T) {
			got, pieces := roundTrip(t, nc, func(r micro.Request) error { return wire.Respond(nc, r, answer) })
			if (pieces > 0) != (name == "large") {
				t.Fatalf("the %s answer came in %d pieces", name, pieces)
			}
			if !bytes.Equal(got, answer) {
				t.Fatalf("the %s answer came back as %d bytes, not the %d sent (or not in order)", name, len(got), len(answer))
			}
		})
	}
}

// roundTrip asks an endpoint that answers by answer, as a client does
// (naming an inbox for pieces), and gives back the answer's bytes
// assembled, and how many pieces they came in (0: one message).
func roundTrip(t *testing.T, nc *nats.Conn, answer func(micro.Request) error) ([]byte, int) {
	t.Helper()
	svc, err := micro.AddService(nc, micro.Config{Name: "chunks", Version: "0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Stop()
	err = svc.AddEndpoint("answer", micro.HandlerFunc(func(r micro.Request) {
		if err := answer(r); err != nil {
			t.Error(err)
		}
	}), micro.WithEndpointSubject("test.chunks"))
	if err != nil {
		t.Fatal(err)
	}
	pieces := make(chan *nats.Msg, 64)
	inbox := nc.NewRespInbox()
	sub, err := nc.ChanSubscribe(inbox, pieces)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	req := withInbox("test.chunks", inbox)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	msg, err := nc.RequestMsgWithContext(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	n := msg.Header.Get(wire.ChunkCountHeader)
	if n == "" {
		return msg.Data, 0
	}
	got, err := wire.Assemble(ctx, msg, pieces)
	if err != nil {
		t.Fatal(err)
	}
	count, _ := strconv.Atoi(n)
	return got, count
}
