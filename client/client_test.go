package client_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/meshctl/mesh/client"
	"github.com/meshctl/mesh/embedded/embeddedtest"
	"github.com/meshctl/mesh/events/store"
	"github.com/meshctl/mesh/wire"
	"github.com/nats-io/nats.go/micro"
)

// Rule 26: a client never waits blind. A controller that takes a change and
// goes away before answering is noticed within about a second, not at the
// end of the timeout, and the outcome is unknown, said with what the log
// holds since; a read is simply failed. One that never answers ends at the
// timeout, the same way.
func TestAClientNeverWaitsBlind(t *testing.T) {
	t.Parallel() // its own bus, and seconds of waiting for a timeout: beside the other
	ctx := context.Background()
	srv := embeddedtest.Server(t)
	if _, _, err := store.Open(ctx, embeddedtest.Conn(t, srv), store.StreamConfig{}); err != nil {
		t.Fatal(err)
	}
	// A controller that takes every request and never answers: a real
	// service on the services protocol, as the controller is one.
	taken := make(chan struct{}, 8)
	svcConn := embeddedtest.Conn(t, srv)
	svc, err := micro.AddService(svcConn, micro.Config{Name: wire.ServiceName, Version: wire.ServiceVersion})
	if err != nil {
		t.Fatal(err)
	}
	for _, subject := range []string{wire.SubjectPush, wire.SubjectStatus} {
		if err := svc.AddEndpoint(strings.ReplaceAll(subject, ".", "-"), micro.HandlerFunc(func(micro.Request) { taken <- struct{}{} }),
			micro.WithEndpointSubject(wire.EndpointSubject(subject))); err != nil {
			t.Fatal(err)
		}
	}
	// The endpoints' subscriptions reach the server only when their
	// connection flushes; without this the first request can find no
	// responder at all, which is a different outcome from the one tested.
	if err := svcConn.Flush(); err != nil {
		t.Fatal(err)
	}
	c := &client.Client{NC: embeddedtest.Conn(t, srv), Where: srv.ClientURL(), Timeout: 500 * time.Millisecond}

	// Never answered: the timeout, and an unknown outcome for a change.
	var r wire.PushReply
	err = c.Call(ctx, wire.SubjectPush, wire.PushRequest{CommandID: wire.NewCommandID()}, &r)
	if !errors.Is(err, client.ErrUnknownOutcome) || !strings.Contains(err.Error(), "did not answer within 500ms") ||
		!strings.Contains(err.Error(), "nothing has landed in the log since the request") {
		t.Fatalf("a push never answered: %v", err)
	}
	var s wire.StatusReport
	if err := c.Call(ctx, wire.SubjectStatus, wire.StatusRequest{}, &s); !errors.Is(err, client.ErrNoController) || errors.Is(err, client.ErrUnknownOutcome) {
		t.Fatalf("a status never answered: %v", err)
	}

	// Gone mid-request: noticed long before a long timeout (the error says
	// it went away, not that the timeout passed).
	c.Timeout = 10 * time.Minute
	go func() {
		for range 3 { // the push and the status above, then this push
			<-taken
		}
		svc.Stop()
	}()
	err = c.Call(ctx, wire.SubjectPush, wire.PushRequest{CommandID: wire.NewCommandID()}, &r)
	if !errors.Is(err, client.ErrUnknownOutcome) || !strings.Contains(err.Error(), "the controller went away before it answered") {
		t.Fatalf("a push whose controller went away: %v", err)
	}
}
