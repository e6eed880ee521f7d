package client_test

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/meshctl/mesh/client"
	"github.com/meshctl/mesh/embedded"
	"github.com/meshctl/mesh/embedded/embeddedtest"
	"github.com/meshctl/mesh/events/store"
	"github.com/meshctl/mesh/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
)

// silentController is a real service on the services protocol, as the
// controller is one, that takes every push and never answers: what a
// controller in the middle of a long push looks like from outside.
func silentController(t *testing.T, nc *nats.Conn) <-chan struct{} {
	t.Helper()
	taken := make(chan struct{}, 8)
	svc, err := micro.AddService(nc, micro.Config{Name: wire.ServiceName, Version: wire.ServiceVersion})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Stop() })
	for _, subject := range []string{wire.SubjectPush, wire.SubjectStatus} {
		if err := svc.AddEndpoint(strings.ReplaceAll(subject, ".", "-"), micro.HandlerFunc(func(micro.Request) { taken <- struct{}{} }),
			micro.WithEndpointSubject(wire.EndpointSubject(subject))); err != nil {
			t.Fatal(err)
		}
	}
	// Subscriptions reach the server when the connection flushes: before
	// that a request finds no responder, a different outcome.
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return taken
}

// The bus dies under a client waiting for a push's answer (mesh up
// killed): the client stops waiting within about two seconds of losing it,
// not after nats.go's two minutes of reconnecting, and the outcome is
// unknown, saying the bus went away and that the log cannot be read now
// (issue 28). A read gets no answer, which is its own kind (exit 3 too).
func TestAClientNoticesItsBusDying(t *testing.T) {
	t.Parallel() // its own bus, and seconds of waiting for a timeout: beside the other
	for _, subject := range []string{wire.SubjectPush, wire.SubjectStatus} {
		t.Run(subject, func(t *testing.T) {
			t.Parallel() // each waits about two seconds to notice: side by side
			noticesItsBusDying(t, subject)
		})
	}
}

// noticesItsBusDying is one request of TestAClientNoticesItsBusDying.
func noticesItsBusDying(t *testing.T, subject string) {
	ctx := context.Background()
	srv := embeddedtest.Server(t)
	if _, _, err := store.Open(ctx, embeddedtest.Conn(t, srv), store.StreamConfig{}); err != nil {
		t.Fatal(err)
	}
	taken := silentController(t, embeddedtest.Conn(t, srv))
	nc, err := nats.Connect(srv.ClientURL(), client.Options()...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	// Noticing, not the timeout, ends the wait: the sentence says which.
	c := &client.Client{NC: nc, Where: srv.ClientURL(), Timeout: embeddedtest.Settle}
	go func() {
		<-taken
		srv.Close()
	}()
	var err2 error
	if subject == wire.SubjectPush {
		err2 = c.Call(ctx, subject, wire.PushRequest{CommandID: wire.NewCommandID()}, &wire.PushReply{})
		if !errors.Is(err2, client.ErrUnknownOutcome) || !strings.Contains(err2.Error(), "went away before the controller answered") ||
			!strings.Contains(err2.Error(), "cannot be read while the bus is away") || !strings.Contains(err2.Error(), "mesh events --from 1") {
			t.Fatalf("a push whose bus died: %v", err2)
		}
	} else {
		err2 = c.Call(ctx, subject, wire.StatusRequest{}, &wire.StatusReport{})
		if !errors.Is(err2, client.ErrNoAnswer) || errors.Is(err2, client.ErrUnknownOutcome) || !strings.Contains(err2.Error(), "went away") {
			t.Fatalf("a status whose bus died: %v", err2)
		}
	}
}

// The bus comes back at once (mesh up restarted, on the same port and
// data), with a new controller: the request the old one took is gone, and
// the client says so as soon as it finds only the new one serving, with
// what the log holds, rather than waiting its whole --timeout (issue 28).
func TestAClientWhoseRequestWasLostOnARestartSaysSo(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	port := freePort(t)
	srv, err := embedded.Start(ctx, embedded.Options{Dir: dir, Port: port})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	if _, _, err := store.Open(ctx, embeddedtest.Conn(t, srv), store.StreamConfig{}); err != nil {
		t.Fatal(err)
	}
	old := embeddedtest.Conn(t, srv)
	taken := silentController(t, old)
	nc, err := nats.Connect(srv.ClientURL(), client.Options()...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	c := &client.Client{NC: nc, Where: srv.ClientURL(), Timeout: embeddedtest.Settle}
	restarted := make(chan *embedded.Server, 1)
	go func() {
		<-taken
		old.Close() // the old controller dies with its mesh up
		srv.Close()
		again, err := embedded.Start(ctx, embedded.Options{Dir: dir, Port: port})
		if err != nil {
			t.Error(err)
			restarted <- nil
			return
		}
		// A new controller, as a restarted mesh up starts one.
		conn, err := nats.Connect(again.ClientURL())
		if err != nil {
			t.Error(err)
		} else {
			silentController(t, conn)
			t.Cleanup(conn.Close)
		}
		restarted <- again
	}()
	err = c.Call(ctx, wire.SubjectPush, wire.PushRequest{CommandID: wire.NewCommandID()}, &wire.PushReply{})
	if again := <-restarted; again != nil {
		t.Cleanup(again.Close)
	}
	// Either the bus came back inside the grace and the new controller was
	// found (the request lost), or the bus was away longer than the grace
	// on a loaded machine: both are the unknown outcome, said at once; only
	// the first can read the log.
	if !errors.Is(err, client.ErrUnknownOutcome) || strings.Contains(err.Error(), "did not answer within") ||
		!strings.Contains(err.Error(), "the controller that took the request is gone") && !strings.Contains(err.Error(), "went away before the controller answered") {
		t.Fatalf("a push whose controller was restarted: %v", err)
	}
	if strings.Contains(err.Error(), "the controller that took the request is gone") && !strings.Contains(err.Error(), "nothing has landed in the log since the request") {
		t.Fatalf("a push lost on a restart does not say what landed: %v", err)
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, p, _ := net.SplitHostPort(l.Addr().String())
	n, _ := strconv.Atoi(p)
	return n
}
