package store

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
)

// Loading an aggregate by batched direct gets (issue 13, rule 25): one
// request answers up to getBatch of the aggregate's messages, in order, and
// leaves nothing behind on the stream. An ordered consumer per load was one
// consumer per command, each lingering after it, and a stream refuses more
// than a thousand.

// getBatch is how many messages one batched direct get asks for.
const getBatch = 1000

// directRequest is JetStream's direct get request, as a batch from a
// sequence on the messages of one subject filter.
type directRequest struct {
	Seq     uint64 `json:"seq"`
	NextFor string `json:"next_by_subj"`
	Batch   int    `json:"batch"`
	// MaxBytes bounds one batch's bytes, as readBytes bounds a read's:
	// without it the server sends a batch of up to 64 MiB (its max
	// pending) at once, and large messages would make the controller's
	// connection a slow consumer, cut by the bus.
	MaxBytes int `json:"max_bytes,omitempty"`
}

// batchGet answers the messages on filter from sequence from on, at most
// n of them (and at most getBatch), and how many more match after them.
func (s *Store) batchGet(ctx context.Context, filter string, from uint64, n int) ([]Msg, uint64, error) {
	n = min(max(n, 1), getBatch)
	req, _ := json.Marshal(directRequest{Seq: from, NextFor: filter, Batch: n, MaxBytes: readBytes})
	inbox := s.nc.NewRespInbox()
	replies := make(chan *nats.Msg, n+1)
	sub, err := s.nc.ChanSubscribe(inbox, replies)
	if err != nil {
		return nil, 0, err
	}
	defer sub.Unsubscribe()
	if err := s.nc.PublishRequest("$JS.API.DIRECT.GET."+s.name, inbox, req); err != nil {
		return nil, 0, err
	}
	var out []Msg
	for {
		var m *nats.Msg
		select {
		case m = <-replies:
		case <-ctx.Done():
			return nil, 0, ctx.Err()
		case <-time.After(cmp.Or(s.Timeout, CallTimeout)):
			// Each reply within the bound: a bus killed mid-batch sends
			// no more, and the load fails rather than waits for ever.
			return nil, 0, nats.ErrTimeout
		}
		switch status := m.Header.Get("Status"); status {
		case "":
		case "404": // nothing matches from there
			return out, 0, nil
		case "204": // the end of the batch
			pending, _ := strconv.ParseUint(m.Header.Get("Nats-Num-Pending"), 10, 64)
			return out, pending, nil
		case "503":
			return nil, 0, nats.ErrNoResponders
		default:
			return nil, 0, fmt.Errorf("store: cannot read %s from event %d: %s %s", filter, from, status, m.Header.Get("Description"))
		}
		msg, err := directMsg(m)
		if err != nil {
			return nil, 0, fmt.Errorf("store: a message on %s came without its sequence", filter)
		}
		out = append(out, msg)
	}
}
