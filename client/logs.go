package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/meshctl/mesh/aggregates"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
)

// ErrNodeSilent: no agent of the node answered a question put to it (it is
// not running, cannot reach the bus, or there is no such node). A question
// with no answer, of kind ErrNoAnswer (exit 3), as a status no controller
// answered is.
var ErrNodeSilent = errors.New("the node's agent did not answer")

// nodeSilent is a question its node did not answer: its sentence, of both
// kinds.
type nodeSilent struct{ msg string }

func (e nodeSilent) Error() string { return e.msg }
func (e nodeSilent) Is(target error) bool {
	return target == ErrNodeSilent || target == ErrNoAnswer
}

// Logs asks node's agent for a piece of a module's program log
// (wire.LogsRequest): on the node's logs subject, the answer under its
// reply prefix, where only that node may publish. It waits Timeout
// (DefaultTimeout when 0) beyond what the request lets the agent wait.
func (c *Client) Logs(ctx context.Context, node string, req wire.LogsRequest) (wire.LogsReply, error) {
	timeout := c.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout+time.Duration(req.WaitMS)*time.Millisecond)
	defer cancel()
	var denial context.CancelCauseFunc
	ctx, denial = context.WithCancelCause(ctx)
	defer denial(nil)
	data, err := json.Marshal(req)
	if err != nil {
		return wire.LogsReply{}, err
	}
	// A token of the client's own after the node's reply prefix: the
	// inbox's unique part, so two askers never read each other's answers.
	inbox := c.NC.NewInbox()
	reply := events.LogsReplyPrefix(node) + "." + inbox[strings.LastIndexByte(inbox, '.')+1:]
	// Subscribed before the request goes out on the same connection, so
	// the server knows it before the agent can answer, and says at once
	// when nothing hears the request (no responders).
	if c.Denials != nil {
		go c.hearDenial(ctx, denial, events.LogsSubject(node), reply)
	}
	sub, err := c.NC.SubscribeSync(reply)
	if err != nil {
		return wire.LogsReply{}, fmt.Errorf("cannot ask %s for its logs on the bus at %s: %w", node, c.Where, err)
	}
	defer sub.Unsubscribe()
	if err := c.NC.PublishRequest(events.LogsSubject(node), reply, data); err != nil {
		return wire.LogsReply{}, fmt.Errorf("cannot ask %s for its logs on the bus at %s: %w", node, c.Where, err)
	}
	msg, err := sub.NextMsgWithContext(ctx)
	switch {
	case errors.Is(context.Cause(ctx), errDenied):
		// Refused by the bus, at once rather than at the timeout: a role
		// that may not ask for a node's logs (rule 28).
		return wire.LogsReply{}, aggregates.Refuse("ask", node+"'s logs", aggregates.ErrForbidden, fmt.Sprintf(
			"the bus refused it, as this operator's role does not allow it; asking a node for its programs' logs needs the %s role (an admin gives one with mesh operator add NAME --role %s)",
			events.RoleDeployer, events.RoleDeployer))
	case errors.Is(err, nats.ErrNoResponders):
		return wire.LogsReply{}, nodeSilent{fmt.Sprintf("no agent of %s is on the bus at %s: it is not running or cannot reach the bus, or %s is no node of this mesh (mesh node list); mesh status says when it was last heard", node, c.Where, node)}
	case errors.Is(err, context.DeadlineExceeded):
		return wire.LogsReply{}, nodeSilent{fmt.Sprintf("%s's agent did not answer within %s; is it well? (mesh status)", node, timeout)}
	case err != nil:
		return wire.LogsReply{}, err
	}
	if desc := msg.Header.Get(micro.ErrorHeader); desc != "" {
		return wire.LogsReply{}, &RemoteError{Code: msg.Header.Get(micro.ErrorCodeHeader), Description: desc, Kind: msg.Header.Get(wire.KindHeader)}
	}
	var out wire.LogsReply
	if err := json.Unmarshal(msg.Data, &out); err != nil {
		return wire.LogsReply{}, fmt.Errorf("%s's answer is not a log this mesh binary reads (%v); are it and its agent the same version?", node, err)
	}
	return out, nil
}

// LogsAll reads what req asks for whole, a piece at a time (an answer
// holds at most what a node may publish): every line, oldest first, the
// number of the last (what a --follow asks after), and how many the bound
// dropped between pieces (a program writing faster than they are read).
func (c *Client) LogsAll(ctx context.Context, node string, req wire.LogsRequest) (wire.LogsReply, error) {
	var all wire.LogsReply
	for {
		r, err := c.Logs(ctx, node, req)
		if err != nil {
			return wire.LogsReply{}, err
		}
		all.Lines = append(all.Lines, r.Lines...)
		all.Last, all.Dropped = r.Last, all.Dropped+r.Dropped
		if !r.More {
			return all, nil
		}
		req = wire.LogsRequest{Module: req.Module, After: r.Last}
	}
}
