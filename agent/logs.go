package agent

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"time"

	"github.com/meshctl/mesh/agent/logbook"
	"github.com/meshctl/mesh/aggregates"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
)

// The bounds of each program's kept log (logbook): what Config.LogBytes
// defaults to, and the least it may be.
const (
	DefaultLogBytes = logbook.DefaultBytes
	MinLogBytes     = logbook.MinBytes
)

// maxLogAsks bounds the requests for logs answered at once: each --follow
// holds one while it waits for a line, and an agent is not a log server.
const maxLogAsks = 16

// maxLogWait bounds how long one request waits for a new line, whatever it
// asks: a --follow asks again, and an agent stopping is not held up.
const maxLogWait = 30 * time.Second

// serveLogs answers the operator's requests for its programs' logs on
// events.LogsSubject (only the operator may publish there on a closed bus:
// busauth), each in a goroutine of its own, until stop: which ends the
// waits and returns once every answer is out.
func (a *Agent) serveLogs(ctx context.Context) (stop func(), err error) {
	node := a.cfg.Join.Node
	ctx, cancel := context.WithCancel(ctx)
	asks := make(chan struct{}, maxLogAsks)
	var wg sync.WaitGroup
	sub, err := a.st.NC().Subscribe(events.LogsSubject(node), func(m *nats.Msg) {
		// An answer can go only under the node's reply prefix (the bus
		// refuses the rest): a request naming elsewhere is not answered.
		token, ok := strings.CutPrefix(m.Reply, events.LogsReplyPrefix(node)+".")
		if !ok || token == "" || strings.ContainsAny(token, ".*>") {
			return
		}
		select {
		case asks <- struct{}{}:
		default:
			a.refuseLogs(m, wire.CodeUnavailable, aggregates.Refuse("show a log of", node, nil,
				"its agent is answering as many requests for logs as it takes at once; try again when a mesh logs --follow has ended"))
			return
		}
		wg.Add(1)
		go func() {
			defer func() { <-asks; wg.Done() }()
			a.answerLogs(ctx, m)
		}()
	})
	if err != nil {
		cancel()
		return nil, err
	}
	return func() {
		_ = sub.Unsubscribe()
		cancel()
		wg.Wait()
	}, nil
}

// answerLogs answers one request: the lines it asks for, after waiting up
// to its WaitMS for one when there is none yet.
func (a *Agent) answerLogs(ctx context.Context, m *nats.Msg) {
	node := a.cfg.Join.Node
	var req wire.LogsRequest
	if err := json.Unmarshal(m.Data, &req); err != nil || req.Module == "" || req.Lines < 0 || req.WaitMS < 0 {
		a.refuseLogs(m, wire.CodeBadRequest, aggregates.Refuse("show a log of", node, aggregates.ErrInvalid,
			"its agent cannot read the request; are mesh and the agent the same version?"))
		return
	}
	if !a.book.Has(req.Module) {
		a.refuseLogs(m, wire.CodeNotFound, aggregates.Refuse("show the log of", req.Module+" on "+node, aggregates.ErrUnknownModule,
			node+" runs no program of "+req.Module+" (mesh node show "+node+" lists its modules; a module's program has a log from its first start)"))
		return
	}
	l := a.book.Of(req.Module)
	reply, grew := l.Read(req)
	if grew != nil && req.WaitMS > 0 {
		t := time.NewTimer(min(time.Duration(req.WaitMS)*time.Millisecond, maxLogWait))
		defer t.Stop()
		select {
		case <-grew:
			reply, _ = l.Read(req)
		case <-t.C:
		case <-ctx.Done():
		}
	}
	b, _ := json.Marshal(reply) // strings, times and numbers: always encodes
	if err := a.st.NC().Publish(m.Reply, b); err != nil {
		a.cfg.Log.Warn("cannot answer a request for a log", "module", req.Module, "err", err)
	}
}

// refuseLogs answers m with a refusal in the controller's terms (its code,
// its sentence, its kind), which the client reads as it reads the
// controller's.
func (a *Agent) refuseLogs(m *nats.Msg, code string, err *aggregates.Error) {
	out := nats.NewMsg(m.Reply)
	out.Header.Set(micro.ErrorHeader, err.Error())
	out.Header.Set(micro.ErrorCodeHeader, code)
	if kind := aggregates.Kind(err); kind != "" {
		out.Header.Set(wire.KindHeader, kind)
	}
	if perr := a.st.NC().PublishMsg(out); perr != nil {
		a.cfg.Log.Warn("cannot answer a request for a log", "err", perr)
	}
}
