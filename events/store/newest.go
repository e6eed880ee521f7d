package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/meshctl/mesh/events"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// A node's newest declaration, asked of the controller (issue 29). A
// reply subject aimed at a node's declaration subject puts a message
// there that the controller never wrote (the bus refuses no reply
// subject: docs/security.md, "Who may say what"), and a node may read only
// the last message on its subject: JetStream's direct get in the form a
// closed bus grants it (the subject in the request's subject) answers the
// last message and nothing else (up_to_seq, seq and batch are refused with
// 408). So an agent that finds its newest message unsigned asks the
// controller, whose fold already knows which message was its own. The
// request names nothing but the node (its subject): the controller answers
// once its fold has passed the newest message on the node's subject, so
// the answer is never older than what the agent found there, and an asker
// cannot make it wait on a sequence of its own choosing.

// NewestErrorHeader carries why the controller could not answer now (its
// fold is behind, it is busy); an answer with it is retried.
const NewestErrorHeader = "Mesh-Newest-Error"

// NewestNoneHeader marks the answer "no declaration was ever sent".
const NewestNoneHeader = "Mesh-Newest-None"

// NewestWait bounds how long the controller waits for its fold before
// answering: well within the asker's own bound (CallTimeout), so the asker
// hears why rather than a timeout.
const NewestWait = CallTimeout / 2

// NewestAnswer is the answer carrying m, in the shape of a direct get's.
func NewestAnswer(m Msg) *nats.Msg {
	a := nats.NewMsg("")
	a.Data = m.Data
	a.Header.Set(jetstream.SequenceHeader, strconv.FormatUint(m.Seq, 10))
	a.Header.Set(jetstream.SubjectHeader, m.Subject)
	a.Header.Set(jetstream.TimeStampHeaer, m.Time.Format(time.RFC3339Nano))
	return a
}

// NewestRefusal is the answer that no declaration can be given now.
func NewestRefusal(why string) *nats.Msg {
	a := nats.NewMsg("")
	a.Header.Set(NewestErrorHeader, why)
	return a
}

// NewestNone is the answer that node was never sent a declaration.
func NewestNone() *nats.Msg {
	a := nats.NewMsg("")
	a.Header.Set(NewestNoneHeader, "1")
	return a
}

// Newest asks the controller for node's newest declaration, the message
// on node's declaration subject the controller's fold took as its own;
// found false when none was sent.
// The caller still verifies what it is given: the controller's process
// answering is not its signature.
func (s *Store) Newest(ctx context.Context, node string) (Msg, bool, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	resp, err := s.nc.RequestWithContext(ctx, events.NewestSubject(node), nil)
	if errors.Is(err, nats.ErrNoResponders) {
		return Msg{}, false, fmt.Errorf("store: no controller answers for %s's newest declaration; is it running?", node)
	}
	if err != nil {
		return Msg{}, false, fmt.Errorf("store: cannot ask the controller for %s's newest declaration: %w", node, err)
	}
	if why := resp.Header.Get(NewestErrorHeader); why != "" {
		return Msg{}, false, fmt.Errorf("store: the controller cannot give %s's newest declaration yet: %s", node, why)
	}
	if resp.Header.Get(NewestNoneHeader) != "" {
		return Msg{}, false, nil
	}
	m, err := directMsg(resp)
	if err != nil {
		return Msg{}, false, fmt.Errorf("store: the controller's answer for %s's newest declaration came without its sequence", node)
	}
	return m, true, nil
}
