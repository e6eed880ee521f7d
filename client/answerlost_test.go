package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/meshctl/mesh/client"
	"github.com/meshctl/mesh/embedded/embeddedtest"
	"github.com/meshctl/mesh/events/store"
	"github.com/meshctl/mesh/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
)

// A connection that drops while its command waits (a closed bus ends each
// connection at its lifetime; a slow reader is cut) loses whatever answer
// the controller sent in that moment. The client asks, once back, where
// its request stands (wire.Inflight), and an answer that went by is said
// at once, not after --timeout (rule 26); a request still being worked on
// is waited for, and its answer heard.
func TestAnAnswerSentWhileTheConnectionWasAwayIsSaidLost(t *testing.T) {
	t.Parallel() // its own bus: beside the others
	for _, subject := range []string{wire.SubjectPush, wire.SubjectStatus} {
		t.Run(subject, func(t *testing.T) {
			t.Parallel()
			m := newAwayMesh(t)
			done := m.call(subject)
			<-m.taken
			m.cut.Drop()
			embeddedtest.Eventually(t, "the client to lose its connection", func() bool { return !m.nc.IsConnected() })
			// The controller answers into the gap: the test sees it go by
			// on the bus, which had no subscription of the client's for it.
			close(m.release)
			<-m.wentBy
			m.cut.Resume()
			err := <-done
			if subject == wire.SubjectPush {
				if !errors.Is(err, client.ErrUnknownOutcome) || !strings.Contains(err.Error(), "its answer was lost") || strings.Contains(err.Error(), "did not answer within") {
					t.Fatalf("a push whose answer went by while the connection was away: %v", err)
				}
				return
			}
			if !errors.Is(err, client.ErrNoAnswer) || errors.Is(err, client.ErrUnknownOutcome) || !strings.Contains(err.Error(), "ask again") {
				t.Fatalf("a status whose answer went by while the connection was away: %v", err)
			}
		})
	}
}

func TestARequestStillBeingWorkedOnIsWaitedForAcrossADrop(t *testing.T) {
	t.Parallel() // its own bus: beside the others
	m := newAwayMesh(t)
	done := m.call(wire.SubjectPush)
	<-m.taken
	m.cut.Drop()
	embeddedtest.Eventually(t, "the client to lose its connection", func() bool { return !m.nc.IsConnected() })
	m.cut.Resume()
	// Back, it asks; the controller says it is still working on it.
	<-m.asked
	close(m.release)
	if err := <-done; err != nil {
		t.Fatalf("a push answered after the connection came back: %v", err)
	}
}

// awayMesh is a bus, a controller on the services protocol that holds each
// request until released and keeps where each stands as the controller's
// endpoints do (wire.Inflight), and a client reaching the bus through a
// cutter the test can drop it with (embeddedtest.Cutter).
type awayMesh struct {
	t       *testing.T
	nc      *nats.Conn
	c       *client.Client
	cut     *embeddedtest.Cutter
	taken   chan struct{}
	release chan struct{}
	asked   chan struct{}
	wentBy  chan struct{}
}

// answered marks the controller's answer, so that the test knows it when it
// goes by.
const answered = 7

func newAwayMesh(t *testing.T) *awayMesh {
	t.Helper()
	srv := embeddedtest.Server(t)
	ctx := context.Background()
	if _, _, err := store.Open(ctx, embeddedtest.Conn(t, srv), store.StreamConfig{}); err != nil {
		t.Fatal(err)
	}
	m := &awayMesh{t: t, taken: make(chan struct{}, 1), release: make(chan struct{}), asked: make(chan struct{}, 8), wentBy: make(chan struct{}, 1)}
	m.serve(embeddedtest.Conn(t, srv))
	watcher := embeddedtest.Conn(t, srv)
	if _, err := watcher.Subscribe("_INBOX.>", func(msg *nats.Msg) {
		var r wire.PushReply
		if json.Unmarshal(msg.Data, &r) == nil && r.Considered == answered {
			m.wentBy <- struct{}{}
		}
	}); err != nil {
		t.Fatal(err)
	}
	if err := watcher.Flush(); err != nil {
		t.Fatal(err)
	}
	m.cut = embeddedtest.NewCutter(t, "127.0.0.1:0", strings.TrimPrefix(srv.ClientURL(), "nats://"))
	nc, err := nats.Connect(m.cut.URL(), client.Options()...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	m.nc, m.c = nc, &client.Client{NC: nc, Where: m.cut.URL(), Timeout: embeddedtest.Settle}
	return m
}

// serve is the controller: push and status held until released, then
// answered; where each request stands answered by every controller.
func (m *awayMesh) serve(nc *nats.Conn) {
	var q wire.Inflight
	svc, err := micro.AddService(nc, micro.Config{Name: wire.ServiceName, Version: wire.ServiceVersion})
	if err != nil {
		m.t.Fatal(err)
	}
	m.t.Cleanup(func() { svc.Stop() })
	held := micro.HandlerFunc(func(r micro.Request) {
		defer q.Begin(r.Headers().Get(wire.ChunksToHeader))()
		m.taken <- struct{}{}
		<-m.release
		_ = r.RespondJSON(wire.PushReply{Considered: answered})
	})
	for _, subject := range []string{wire.SubjectPush, wire.SubjectStatus} {
		if err := svc.AddEndpoint(strings.ReplaceAll(subject, ".", "-"), held, micro.WithEndpointSubject(wire.EndpointSubject(subject))); err != nil {
			m.t.Fatal(err)
		}
	}
	state := micro.HandlerFunc(func(r micro.Request) {
		var req wire.RequestStateRequest
		_ = json.Unmarshal(r.Data(), &req)
		st, _ := q.State(context.Background(), req)
		_ = r.RespondJSON(st)
		m.asked <- struct{}{}
	})
	if err := svc.AddEndpoint("request-state", state, micro.WithEndpointSubject(wire.EndpointSubject(wire.SubjectRequestState)),
		micro.WithEndpointQueueGroupDisabled()); err != nil {
		m.t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		m.t.Fatal(err)
	}
}

// call sends subject's request and answers its outcome.
func (m *awayMesh) call(subject string) <-chan error {
	done := make(chan error, 1)
	go func() {
		var r wire.PushReply
		err := m.c.Call(context.Background(), subject, wire.PushRequest{CommandID: wire.NewCommandID()}, &r)
		if err == nil && r.Considered != answered {
			err = errors.New("an answer not the controller's")
		}
		done <- err
	}()
	return done
}
