// Package client calls the controller's verbs over the bus: the request, an
// answer in pieces when it is large, a controller that went away noticed
// within a second, and an unknown outcome said with what the log holds
// (rule 26). It also asks a node's agent for a program's log (Logs), the
// one question put to an agent rather than a controller. The command line
// and the tests use it; the controller never does.
package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/meshctl/mesh/aggregates"
	"github.com/meshctl/mesh/events/store"
	"github.com/meshctl/mesh/wire"
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
	// Denials, when set, hears the bus refuse a verb's publish, which
	// then fails at once (caller.go); nil waits out the timeout.
	Denials *Denials
}

// RemoteError is a refusal or failure the controller answered: its code,
// its sentence, and its kind (aggregates.Kind), which Unwrap gives back as
// the refusal's sentinel, so errors.Is sees the same kind on both sides.
type RemoteError struct {
	Code        string
	Description string
	Kind        string
}

func (e *RemoteError) Error() string { return e.Description }

// Unwrap is the refusal's kind, or wire.ErrReadOnly for a controller that takes
// no writes; nil for any other failure.
func (e *RemoteError) Unwrap() error {
	if k := aggregates.KindNamed(e.Kind); k != nil {
		return k
	}
	if e.Code == wire.CodeUnavailable {
		return wire.ErrReadOnly
	}
	return nil
}

// ErrNoController: the bus is up but nothing serves the verbs.
var ErrNoController = errors.New("no mesh controller is answering")

// ErrUnknownOutcome: a request that changes the mesh was delivered, and no
// answer came (the controller went away, or did not finish in time). It
// may have acted: the error says what the log holds since the request, and
// how to check. Rule 26: every wait is bounded and every outcome said.
var ErrUnknownOutcome = errors.New("the outcome is unknown")

// ErrNoAnswer: a question (a read: status, a listing) went unanswered, so
// the command cannot say what was asked: whether the mesh is well is
// unknown, not "no" (exit 3, as for a change whose outcome is unknown).
var ErrNoAnswer = errors.New("no controller answered the question")

// noAnswer is an unanswered read: its sentence, and of kind ErrNoAnswer
// beside what it wraps (ErrNoController).
type noAnswer struct{ error }

func (e noAnswer) Is(target error) bool { return target == ErrNoAnswer }
func (e noAnswer) Unwrap() error        { return e.error }

// watchEvery is how often a client waiting for an answer asks whether a
// controller is still there: one that died is noticed within it, not at
// the end of a push's minutes-long timeout.
const watchEvery = time.Second

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
	out := nats.NewMsg(wire.CallerSubject(c.caller(), subject))
	out.Data = data
	out.Header.Set(wire.ChunksToHeader, inbox)
	from := noPosition
	if wire.Writes(subject) {
		from = c.streamEnd(ctx)
	}
	msg, err := c.request(ctx, out)
	writes := wire.Writes(subject)
	switch {
	case errors.Is(err, errDenied):
		// Refused by the bus before any controller saw it: nothing was done.
		return denied(subject)
	case errors.Is(err, nats.ErrNoResponders) && writes:
		// Nothing took the request, so nothing was done: a failure, not
		// an unknown outcome.
		return fmt.Errorf("%w on the bus at %s; start one with `mesh up` (one box) or `mesh serve`", ErrNoController, c.Where)
	case errors.Is(err, nats.ErrNoResponders):
		return noAnswer{fmt.Errorf("%w on the bus at %s, so this cannot be answered; start one with `mesh up` (one box) or `mesh serve`", ErrNoController, c.Where)}
	case errors.Is(err, errBusLost) && writes:
		return c.unknownOutcome(fmt.Sprintf("the bus at %s went away before the controller answered", c.Where), from)
	case errors.Is(err, errBusLost):
		return noAnswer{fmt.Errorf("the bus at %s went away before the controller answered; check that `mesh up` or `mesh serve` is running", c.Where)}
	case errors.Is(err, errRequestLost) && writes:
		return c.unknownOutcome("the controller that took the request is gone, and another answers now (a restarted mesh up?)", from)
	case errors.Is(err, errAnswerLost) && writes:
		return c.unknownOutcome(errAnswerLost.Error(), from)
	case errors.Is(err, errAnswerLost):
		return noAnswer{fmt.Errorf("%w; ask again", errAnswerLost)}
	case errors.Is(err, errControllerGone) && writes:
		return c.unknownOutcome("the controller went away before it answered", from)
	case errors.Is(err, context.DeadlineExceeded) && writes, errors.Is(err, nats.ErrTimeout) && writes:
		return c.unknownOutcome(fmt.Sprintf("the controller did not answer within %s (--timeout)", timeout), from)
	case errors.Is(err, errControllerGone), errors.Is(err, errRequestLost):
		return noAnswer{fmt.Errorf("%w: the controller went away before it answered; check that `mesh up` or `mesh serve` is running", ErrNoController)}
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout):
		return noAnswer{fmt.Errorf("%w within %s on the bus at %s; check that `mesh up` or `mesh serve` is running and healthy, or give a longer --timeout", ErrNoController, timeout, c.Where)}
	case err != nil:
		return fmt.Errorf("cannot reach the controller on the bus at %s: %w", c.Where, err)
	}
	if msg.Header.Get(micro.ErrorCodeHeader) == wire.CodeCut && writes {
		return c.unknownOutcome(msg.Header.Get(micro.ErrorHeader), from)
	}
	if desc := msg.Header.Get(micro.ErrorHeader); desc != "" {
		return &RemoteError{Code: msg.Header.Get(micro.ErrorCodeHeader), Description: desc, Kind: msg.Header.Get(wire.KindHeader)}
	}
	body := msg.Data
	if msg.Header.Get(wire.ChunkCountHeader) != "" {
		if body, err = wire.Assemble(ctx, msg, pieces); err != nil {
			return err
		}
	}
	if err := json.Unmarshal(body, resp); err != nil {
		return fmt.Errorf("the controller's answer on %s is not what this mesh binary expects (%v); are both the same version?", subject, err)
	}
	return nil
}

// pingSubject is where the services protocol answers for every controller.
const pingSubject = "$SRV.PING." + wire.ServiceName

// noPosition: the stream's position could not be read.
const noPosition = ^uint64(0)

// streamEnd is the stream's last sequence now, noPosition when it cannot
// be read.
func (c *Client) streamEnd(ctx context.Context) uint64 {
	st, err := store.Attach(ctx, c.NC, "")
	if err != nil {
		return noPosition
	}
	s, err := st.State(ctx)
	if err != nil {
		return noPosition
	}
	return s.LastSeq
}

// unknownOutcome says what the log holds since a write was asked for:
// what landed, as far as the log can tell, and how to check the rest.
func (c *Client) unknownOutcome(why string, from uint64) error {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	landed := "the log could not be read to say what landed"
	if !c.NC.IsConnected() {
		// Not tried: a read on a connection that is away waits out its
		// whole bound for nothing.
		landed = "the log cannot be read while the bus is away"
	} else if st, err := store.Attach(ctx, c.NC, ""); err == nil && from != noPosition {
		counts := map[string]int{}
		var first, last uint64
		err := st.Read(ctx, store.ReadOptions{From: from + 1}, func(m store.Msg) error {
			if first == 0 {
				first = m.Seq
			}
			last = m.Seq
			counts[m.Subject[strings.LastIndexByte(m.Subject, '.')+1:]]++
			return nil
		})
		switch {
		case err != nil:
		case first == 0:
			landed = "nothing has landed in the log since the request"
		default:
			var parts []string
			for _, typ := range slices.Sorted(maps.Keys(counts)) {
				parts = append(parts, fmt.Sprintf("%d %s", counts[typ], typ))
			}
			landed = fmt.Sprintf("since the request the log holds %s (events %d to %d), this request's or another's", strings.Join(parts, ", "), first, last)
		}
	}
	check := "mesh events"
	if from != noPosition {
		check = fmt.Sprintf("mesh events --from %d", from+1)
	}
	return fmt.Errorf("%w: %s; %s; see mesh status, mesh history NODE or %s before trying again", ErrUnknownOutcome, why, landed, check)
}

// Judge asks the controller how its fold took the message at seq: what
// push --wait asks of a report it found before it believes it
// (WaitReport).
func (c *Client) Judge(ctx context.Context, seq uint64) (wire.Judgement, error) {
	var j wire.Judgement
	err := c.Call(ctx, wire.SubjectReportJudge, wire.JudgeRequest{Seq: seq}, &j)
	return j, err
}
