package commands

import (
	"context"
	"fmt"
	"strings"

	"github.com/meshctl/mesh/artifact"
	"github.com/meshctl/mesh/commands/core"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/events/store"
	"github.com/meshctl/mesh/wire"
	"github.com/nats-io/nats.go"
)

// askedAtOnce bounds the answers in flight on each subject agents ask the
// controller on: each may wait for the fold or the bus (store.NewestWait),
// and a node asking in a loop must not pile up goroutines in the
// controller. One past it is told to ask again.
const askedAtOnce = 32

// busy is what an agent asking past askedAtOnce is told.
const busy = "the controller is answering many such requests; ask again"

// answerAgents answers agents asking on prefix.<node>, each on its own
// goroutine, at most askedAtOnce at a time (past it, refused with busy),
// and only to the asker's own inbox (toOwnInbox).
func answerAgents(c *core.Core, prefix string, answer func(node string, data []byte) *nats.Msg, refuse func(why string) *nats.Msg) (stop func(), err error) {
	slots := make(chan struct{}, askedAtOnce)
	sub, err := c.Store.NC().QueueSubscribe(prefix+".*", wire.ServiceName, func(m *nats.Msg) {
		node := m.Subject[len(prefix)+1:]
		if !toOwnInbox(node, m.Reply) {
			return
		}
		select {
		case slots <- struct{}{}:
		default:
			_ = m.RespondMsg(refuse(busy))
			return
		}
		go func() {
			defer func() { <-slots }()
			_ = m.RespondMsg(answer(node, m.Data))
		}()
	})
	if err != nil {
		return nil, fmt.Errorf("cannot answer the agents on %s.*: %w", prefix, err)
	}
	return func() { _ = sub.Unsubscribe() }, nil
}

// toOwnInbox says whether a request from node may be answered at reply:
// only an inbox, the asker's own on a closed bus. The answer is the
// controller's publish, which no permission limits, and aimed at a subject
// of the stream it would be stored there: a side door into another's
// subjects (issue 29).
func toOwnInbox(node, reply string) bool {
	return events.ValidateName("node", node) == nil &&
		(strings.HasPrefix(reply, "_INBOX.") || strings.HasPrefix(reply, events.NodeInbox(node)+"."))
}

// serveNewest answers agents asking for their newest declaration (issue
// 29, store.Newest): an agent that finds on its declaration subject a
// message the controller did not sign cannot read past it itself.
func serveNewest(h *Services) (stop func(), err error) {
	return answerAgents(h.Core, events.NewestPrefix, func(node string, _ []byte) *nats.Msg { return newest(h.Core, node) }, store.NewestRefusal)
}

// newest is node's newest declaration the fold took as the controller's,
// once the fold has passed the newest message on node's subject (whatever
// wrote it): a declaration sent before that message is then folded.
func newest(c *core.Core, node string) *nats.Msg {
	ctx, cancel := context.WithTimeout(context.Background(), store.NewestWait)
	defer cancel()
	top, found, err := c.Store.Last(ctx, events.DeclarationSubject(node))
	if err != nil {
		return store.NewestRefusal(err.Error())
	}
	if !found {
		return store.NewestNone()
	}
	if err := c.Proj.WaitFor(ctx, top.Seq); err != nil {
		return store.NewestRefusal(fmt.Sprintf("the controller has not folded event %d yet", top.Seq))
	}
	n, found, err := c.Proj.Node(node)
	switch {
	case err != nil:
		return store.NewestRefusal(err.Error())
	case !found || n.LastSent == nil:
		return store.NewestNone()
	}
	m, err := c.Store.Get(ctx, n.LastSent.StreamSeq)
	if err != nil {
		return store.NewestRefusal(err.Error())
	}
	return store.NewestAnswer(m)
}

// serveArtifacts answers agents asking for an artifact their declaration
// names (issue 32, artifacts.Hand): a consumer of that object alone, which
// the bus serves to the node; the controller carries no byte of it.
func serveArtifacts(h *Services) (stop func(), err error) {
	return answerAgents(h.Core, events.ArtifactPrefix,
		func(node string, data []byte) *nats.Msg { return jsonAnswer(h.Artifacts.Hand(node, data)) },
		func(why string) *nats.Msg { return jsonAnswer(artifact.Handed{Error: why}) })
}
