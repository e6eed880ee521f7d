package client

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/meshctl/mesh/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
)

// A client waiting for an answer watches three things, so that it never
// waits blind (rule 26): its own connection to the bus, whether a
// controller still serves, and whether the controller that took its
// request is still the one serving.

// busGrace is how long a client stays without a bus before it stops
// waiting: on a cluster a connection moves to another server in well under
// it (the pool holds the others, tried at once), while a killed mesh up
// leaves nothing to move to. Longer, and a push against a dead mesh up
// hangs on; shorter, and a cluster's failover would end requests that
// would have been answered.
const busGrace = 2 * time.Second

// Options are the connection options of a command line client: a bus that
// dies is noticed in about two seconds, not at nats.go's defaults (a ping
// every two minutes, and sixty tries two seconds apart, which made a push
// wait 123 s for "connection closed" after mesh up was killed).
func Options() []nats.Option {
	return []nats.Option{
		// A server gone without closing its socket (its machine lost) is
		// found by pings: two unanswered a second apart.
		nats.PingInterval(time.Second), nats.MaxPingsOutstanding(2),
		// A restarted mesh up is found again within a quarter second of
		// listening, inside busGrace, so a lost request is said quickly.
		nats.ReconnectWait(250 * time.Millisecond), nats.ReconnectJitter(50*time.Millisecond, 50*time.Millisecond),
		nats.MaxReconnects(-1), // the watch, not nats.go, decides when to stop
		// A command says its own outcome in one sentence: nats.go's default
		// handler printed its asynchronous errors too ("read tcp ...: i/o
		// timeout" as mesh up died), a second, raw line on stderr.
		nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}),
	}
}

// Why a client stopped waiting before its answer came.
var (
	errControllerGone = errors.New("no controller answers any more")
	// errBusLost: the connection to the bus was lost and not found again
	// within busGrace.
	errBusLost = errors.New("the bus went away")
	// errRequestLost: controllers answer, but none of those that served
	// when the request was sent, so the one that took it is gone (a
	// restarted mesh up): its answer will never come.
	errRequestLost = errors.New("the controller that took the request is gone")
	// errAnswerLost: the connection dropped and came back, and the
	// controller that took the request says it answered: the answer went
	// by while the connection was away (wire/inflight.go).
	errAnswerLost = errors.New("the controller answered while the connection to the bus was away, so its answer was lost")
)

// answerGrace is how long a client that learns its request was answered
// still waits for the answer: one sent just after the connection came
// back, and marked answered before it arrived, is on its way, not lost.
const answerGrace = time.Second

// request sends out and waits for the answer, watching the bus and the
// controllers; it stops waiting at the first sign the answer cannot come.
func (c *Client) request(ctx context.Context, out *nats.Msg) (*nats.Msg, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	status := c.NC.StatusChanged(nats.CONNECTED, nats.DISCONNECTED, nats.RECONNECTING, nats.CLOSED)
	defer c.NC.RemoveStatusListener(status)
	// The controllers serving as the request goes out: one of them takes
	// it. The request waits for the first of their answers (one round
	// trip), so that a controller that dies at once is still known to have
	// served; the others' answers are gathered beside it.
	took := make(chan map[string]bool, 1)
	heard := make(chan struct{})
	go func() { took <- c.serving(ctx, heard) }()
	<-heard
	go c.watch(ctx, cancel, status, took, out.Header.Get(wire.ChunksToHeader))
	if c.Denials != nil {
		go c.hearDenial(ctx, cancel, out.Subject)
	}
	msg, err := c.NC.RequestMsgWithContext(ctx, out)
	if cause := context.Cause(ctx); errors.Is(cause, errControllerGone) || errors.Is(cause, errBusLost) || errors.Is(cause, errRequestLost) ||
		errors.Is(cause, errAnswerLost) || errors.Is(cause, errDenied) {
		return nil, cause
	}
	if errors.Is(err, nats.ErrConnectionClosed) {
		return nil, errBusLost
	}
	return msg, err
}

// watch cancels ctx with the reason the answer cannot come: the bus gone
// for busGrace, no controller serving, none of those that served when the
// request went out (took), or the answer sent while the connection was
// away (the request named id: wire.Inflight).
func (c *Client) watch(ctx context.Context, cancel context.CancelCauseFunc, status <-chan nats.Status, took <-chan map[string]bool, id string) {
	tick := time.NewTicker(watchEvery)
	defer tick.Stop()
	var first map[string]bool
	var lost <-chan time.Time     // set while the bus is away
	var answered <-chan time.Time // set once a controller says it answered
	for {
		check := false
		select {
		case <-ctx.Done():
			return
		case first = <-took:
			took = nil
		case <-answered:
			cancel(errAnswerLost)
			return
		case s := <-status:
			switch {
			case s == nats.CONNECTED:
				// Back, on this server or another: whether the request's
				// controller is still there is asked at once, and whether
				// it answered while the connection was away.
				lost, check = nil, true
				if answered == nil && c.answeredAway(ctx, id) {
					answered = time.After(answerGrace)
				}
			case s == nats.CLOSED:
				cancel(errBusLost)
				return
			case lost == nil:
				lost = time.After(busGrace)
			}
		case <-lost:
			cancel(errBusLost)
			return
		case <-tick.C:
			check = lost == nil
		}
		if !check || !c.NC.IsConnected() {
			continue
		}
		now := c.serving(ctx, nil)
		switch {
		case ctx.Err() != nil:
			return
		case now == nil:
			// Asked, but not answered: the bus itself is slow; the next
			// tick asks again.
		case len(now) == 0:
			cancel(errControllerGone)
			return
		case len(first) > 0 && !overlaps(first, now):
			cancel(errRequestLost)
			return
		}
	}
}

// serving is the ids of the controllers that answer a ping now: empty when
// none does, nil when the bus did not say (it is away, or slow). heard, if
// given, is closed at the first answer, or when there is none.
func (c *Client) serving(ctx context.Context, heard chan struct{}) map[string]bool {
	said := sync.OnceFunc(func() {
		if heard != nil {
			close(heard)
		}
	})
	defer said()
	ids := map[string]bool{}
	n, err := c.askEvery(ctx, pingSubject, nil, func(m *nats.Msg) bool {
		var p micro.Ping
		if json.Unmarshal(m.Data, &p) == nil && p.ID != "" {
			ids[p.ID] = true
		}
		said()
		return false
	})
	switch {
	case errors.Is(err, nats.ErrNoResponders): // the bus says nobody serves
		return ids
	case n == 0:
		return nil
	}
	return ids
}

// answeredAway reports whether a controller says it answered the request
// named id (ChunksToHeader). Any other word (working, unknown, none at
// all: an older controller, a slow bus) is no proof the answer went by,
// so the wait goes on as before.
func (c *Client) answeredAway(ctx context.Context, id string) bool {
	if id == "" {
		return false
	}
	data, err := json.Marshal(wire.RequestStateRequest{Request: id})
	if err != nil {
		return false
	}
	answered := false
	_, _ = c.askEvery(ctx, wire.CallerSubject(c.caller(), wire.SubjectRequestState), data, func(m *nats.Msg) bool {
		var st wire.RequestState
		answered = json.Unmarshal(m.Data, &st) == nil && st.Stage == wire.RequestAnswered
		return answered
	})
	return answered
}

// askEvery asks every controller on subject and hands each answer to
// each until it says stop: the first answer within watchEvery, the others
// of several controllers right behind it. It answers how many came, and
// why no more did (nats.ErrNoResponders: the bus says nobody serves; nil
// when each stopped).
func (c *Client) askEvery(ctx context.Context, subject string, data []byte, each func(*nats.Msg) (stop bool)) (int, error) {
	inbox := c.NC.NewInbox()
	sub, err := c.NC.SubscribeSync(inbox)
	if err != nil {
		return 0, err
	}
	defer sub.Unsubscribe()
	if err := c.NC.PublishRequest(subject, inbox, data); err != nil {
		return 0, err
	}
	wait := watchEvery
	for n := 0; ; n++ {
		next, done := context.WithTimeout(ctx, wait)
		m, err := sub.NextMsgWithContext(next)
		done()
		if err != nil {
			return n, err
		}
		if each(m) {
			return n + 1, nil
		}
		wait = 100 * time.Millisecond
	}
}

func overlaps(a, b map[string]bool) bool {
	for id := range a {
		if b[id] {
			return true
		}
	}
	return false
}
