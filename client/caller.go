package client

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/meshctl/mesh/aggregates"
	"github.com/meshctl/mesh/wire"
	"github.com/nats-io/nats.go"
)

// Who calls (issue 33). A verb goes out on wire.CallerSubject under the
// connection's own key, which a closed bus lets an operator publish under
// only for the verbs its role allows. A publish the bus refuses is dropped
// without an answer, so the client listens for the bus's word that it was
// refused (Denials) and says so at once, naming the role the verb needs,
// rather than waiting out its timeout as for a controller that is gone.

// caller is the token the connection calls under: its nkey, or
// wire.OpenCaller for a connection with none (an open bus).
func (c *Client) caller() string {
	if key := c.NC.Opts.Nkey; key != "" {
		return key
	}
	return wire.OpenCaller
}

// Denials hears the bus refuse a connection's publishes.
type Denials struct{ ch chan string }

// NewDenials is a Denials to give a connection (Option) and its Client.
func NewDenials() *Denials { return &Denials{ch: make(chan string, 16)} }

// Option is the connection's error handler: the bus's refusals go to d,
// every other asynchronous error is dropped as Options' handler drops it
// (a command says its outcome in one sentence). Give it after Options.
func (d *Denials) Option() nats.Option {
	return nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		if errors.Is(err, nats.ErrPermissionViolation) {
			select {
			case d.ch <- err.Error():
			default: // a full channel: the caller stopped listening
			}
		}
	})
}

// errDenied: the bus refused the request's publish.
var errDenied = errors.New("the bus refused the request")

// denied is the refusal of a verb the bus would not let this connection
// call, naming the role that would.
func denied(subject string) error {
	verb := strings.TrimPrefix(subject, wire.APIPrefix+".")
	need := wire.Needs(subject)
	return aggregates.Refuse("call", verb, aggregates.ErrForbidden, fmt.Sprintf(
		"the bus refused it, as this operator's role does not allow it; it needs the %s role (an admin gives one with mesh operator add NAME --role %s)", need, need))
}

// hearDenial cancels ctx with errDenied when the bus says it refused a
// publish to (or a subscription of) one of subjects, until ctx ends.
func (c *Client) hearDenial(ctx context.Context, cancel context.CancelCauseFunc, subjects ...string) {
	for {
		select {
		case <-ctx.Done():
			return
		case why := <-c.Denials.ch:
			for _, subject := range subjects {
				if strings.Contains(why, `"`+subject+`"`) {
					cancel(errDenied)
					return
				}
			}
		}
	}
}
