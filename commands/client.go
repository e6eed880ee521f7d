package commands

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
)

// DefaultTimeout bounds a verb's round trip: long enough for a command to
// append and wait for its projection, short enough that a missing controller
// is reported while the operator is still looking.
const DefaultTimeout = 5 * time.Second

// Client calls the controller's verbs over the bus.
type Client struct {
	NC *nats.Conn
	// Where names the bus for error messages ("nats://127.0.0.1:4222 (from MESH_NATS_URL)").
	Where   string
	Timeout time.Duration
}

// RemoteError is a refusal or failure the controller answered.
type RemoteError struct {
	Code        string
	Description string
}

func (e *RemoteError) Error() string { return e.Description }

// ErrNoController: the bus is up but nothing serves the verbs.
var ErrNoController = errors.New("no mesh controller is answering")

// NewCommandID makes the id that turns a retry of this invocation into a no-op.
func NewCommandID() string {
	var b [12]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Call sends req to subject and decodes the answer into resp.
func (c *Client) Call(ctx context.Context, subject string, req, resp any) error {
	timeout := c.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	data, err := json.Marshal(req)
	if err != nil {
		return err
	}
	// The inbox for the pieces of a large answer. It is subscribed before
	// the request goes out on the same connection, so the server knows it
	// before the controller can publish to it.
	pieces := make(chan *nats.Msg, 1024)
	inbox := c.NC.NewRespInbox()
	sub, err := c.NC.ChanSubscribe(inbox, pieces)
	if err != nil {
		return fmt.Errorf("cannot reach the controller on the bus at %s: %w", c.Where, err)
	}
	defer sub.Unsubscribe()
	out := nats.NewMsg(subject)
	out.Data = data
	out.Header.Set(chunksToHeader, inbox)
	msg, err := c.NC.RequestMsgWithContext(ctx, out)
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		return fmt.Errorf("%w on the bus at %s; start one with `mesh up` (one box) or `mesh serve`", ErrNoController, c.Where)
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout):
		return fmt.Errorf("%w within %s on the bus at %s; check that `mesh up` or `mesh serve` is running and healthy", ErrNoController, timeout, c.Where)
	case err != nil:
		return fmt.Errorf("cannot reach the controller on the bus at %s: %w", c.Where, err)
	}
	if desc := msg.Header.Get(micro.ErrorHeader); desc != "" {
		return &RemoteError{Code: msg.Header.Get(micro.ErrorCodeHeader), Description: desc}
	}
	body := msg.Data
	if msg.Header.Get(chunkCountHeader) != "" {
		if body, err = assemble(ctx, msg, pieces); err != nil {
			return err
		}
	}
	if err := json.Unmarshal(body, resp); err != nil {
		return fmt.Errorf("the controller's answer on %s is not what this mesh binary expects (%v); are both the same version?", subject, err)
	}
	return nil
}
