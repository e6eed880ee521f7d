package commands

import (
	"context"
	"fmt"
	"strings"

	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/events/store"
	"github.com/nats-io/nats.go"
)

// newestAtOnce bounds the answers in flight: each may wait for the fold
// (store.NewestWait), and a node asking in a loop must not pile up
// goroutines in the controller. One past it is told to ask again.
const newestAtOnce = 32

// serveNewest answers agents asking for their newest declaration (issue
// 29, store.Newest): an agent that finds on its declaration subject a
// message the controller did not sign cannot read past it itself.
func serveNewest(h *Handlers) (stop func(), err error) {
	nc := h.Store.NC()
	slots := make(chan struct{}, newestAtOnce)
	sub, err := nc.QueueSubscribe(events.SubjectsNewest, ServiceName, func(m *nats.Msg) {
		node := m.Subject[len(events.NewestPrefix)+1:]
		// Only to an inbox, the asker's own on a closed bus: the answer is
		// the controller's publish, which no permission limits, and aimed
		// at a subject of the stream it would be stored there, one more
		// side door into another's subjects.
		if events.ValidateName("node", node) != nil ||
			!(strings.HasPrefix(m.Reply, "_INBOX.") || strings.HasPrefix(m.Reply, events.NodeInbox(node)+".")) {
			return
		}
		select {
		case slots <- struct{}{}:
		default:
			_ = m.RespondMsg(store.NewestRefusal("the controller is answering many such requests; ask again"))
			return
		}
		go func() {
			defer func() { <-slots }()
			_ = m.RespondMsg(h.newest(node))
		}()
	})
	if err != nil {
		return nil, fmt.Errorf("cannot answer the agents on %s: %w", events.SubjectsNewest, err)
	}
	return func() { _ = sub.Unsubscribe() }, nil
}

// newest is node's newest declaration the fold took as the controller's,
// once the fold has passed the newest message on node's subject (whatever
// wrote it): a declaration sent before that message is then folded.
func (h *Handlers) newest(node string) *nats.Msg {
	ctx, cancel := context.WithTimeout(context.Background(), store.NewestWait)
	defer cancel()
	top, found, err := h.Store.Last(ctx, events.DeclarationSubject(node))
	if err != nil {
		return store.NewestRefusal(err.Error())
	}
	if !found {
		return store.NewestNone()
	}
	if err := h.Proj.WaitFor(ctx, top.Seq); err != nil {
		return store.NewestRefusal(fmt.Sprintf("the controller has not folded event %d yet", top.Seq))
	}
	n, found, err := h.Proj.Node(node)
	switch {
	case err != nil:
		return store.NewestRefusal(err.Error())
	case !found || n.LastSent == nil:
		return store.NewestNone()
	}
	m, err := h.Store.Get(ctx, n.LastSent.StreamSeq)
	if err != nil {
		return store.NewestRefusal(err.Error())
	}
	return store.NewestAnswer(m)
}
