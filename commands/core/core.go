package core

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/meshctl/mesh/aggregates"
	"github.com/meshctl/mesh/commands/secrets"
	"github.com/meshctl/mesh/declaration"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/events/store"
	"github.com/meshctl/mesh/projections"
	"github.com/meshctl/mesh/wire"
	"github.com/nats-io/nkeys"
)

// Self is what a controller is, whatever read models it answers from: its
// bus, its log, its mesh's name, its keys and its secrets.
type Self struct {
	Store *store.Store
	Log   *slog.Logger
	// Mesh is the mesh's name: every declaration carries it, so one meant
	// for another mesh is refused.
	Mesh string
	// Key is the controller's key; Signer signs with it (declarations,
	// and a standing on the operator's word); PublicKey is what agents pin.
	Key       nkeys.KeyPair
	Signer    *declaration.Signer
	PublicKey string
	// Keys are derived from Key: the MACs the fold checks (rule 19).
	Keys *declaration.Keyring
	// OpenBus: this controller serves a bus nobody closed (mesh serve
	// --open-bus): the fold still sets aside what is not its rightful
	// writer's, but anyone who reaches the bus may write to the log, ack,
	// assign or delete the stream, and status says so.
	OpenBus bool
	// Secrets are the salts of secret settings (nil: none can be sealed
	// or opened, and a node that needs one is named as not composable).
	Secrets *secrets.Store
	// Replicas is the stream's, which the buckets the controller makes
	// take too (rule 15).
	Replicas int
}

// Core is a controller over one set of read models: the present's, which
// follow the stream, or a fold of the past (--as-of). Time travel makes a
// Core of the same Self over the past's fold, so a field added to Self is
// there too, and the services built over it start with empty caches, as
// they must.
type Core struct {
	Self
	Proj *projections.Engine
	// Now is the controller's clock: a test moves it past a bound instead
	// of waiting it out.
	Now func() time.Time
	// Metrics is told what the controller does (nil: nothing).
	Metrics Metrics
	// Past: this Core answers from a fold of the past, which neither
	// follows the stream nor can be behind it.
	Past bool

	// storageFull: the last write met a bus that could not store it.
	storageFull atomic.Bool
	// bus is why the bus takes no events now, when it does not (its disk
	// failed a write, its directory is gone): writes are refused at once
	// with it, and those in flight are cut with it (bustrouble.go).
	bus busTrouble
}

// Metrics is what the controller tells of its work as it does it.
type Metrics interface {
	// Command: a verb answered after d, with its wire code ("" for none).
	Command(verb string, d time.Duration, code string)
	// Push: a push that sent and left unsent so many nodes, in d.
	Push(sent, unsent int, d time.Duration)
}

// InThePast is a Core of the same Self over read models folded from the
// stream up to at, and what closes them.
func (c *Core) InThePast(ctx context.Context, at time.Time) (*Core, func(), error) {
	past, err := c.Proj.FoldCopy(ctx, 0, at)
	if err != nil {
		return nil, nil, err
	}
	return &Core{Self: c.Self, Proj: past, Now: func() time.Time { return at }, Past: true}, func() { past.Close() }, nil
}

// aggregate is what Decide needs of one: folding its own events.
type aggregate interface {
	Apply(events.Recorded)
}

// Decide loads an aggregate, asks it to decide, and appends the result
// expecting the version it loaded; on a conflict it loads and decides again
// (DecideAndAppend). It answers the sequence of the last event appended (0
// when the command was already satisfied) after the read models have folded
// it. op and the aggregate's id name it in the sentence of a decision that
// other writes kept moving.
func Decide[A aggregate](ctx context.Context, c *Core, op string, id events.AggregateID, commandID string,
	fresh func() A, decideFn func(A) ([]events.Event, error)) (uint64, error) {
	if err := c.Writable(); err != nil {
		return 0, err
	}
	var seq uint64
	var evs []events.Event
	// No reread: each attempt loads the aggregate from the log itself.
	err := DecideAndAppend(ctx, op, id.ID, nil, func(int) error {
		recs, version, err := c.Store.Load(ctx, id)
		if err != nil {
			return err
		}
		a := fresh()
		for _, r := range recs {
			a.Apply(r)
		}
		if evs, err = decideFn(a); err != nil || len(evs) == 0 {
			return err
		}
		seq, err = c.Store.Append(ctx, id, version, commandID, evs...)
		return err
	})
	if err != nil || seq == 0 {
		return 0, err
	}
	return seq, c.Landed(ctx, seq, evs...)
}

// DecideAtomic decides from the read models and appends the items as one
// atomic batch, each expecting the version its aggregate's row holds; when
// any moved meanwhile nothing landed, and it catches up and decides again
// (DecideAndAppend, which pauses a random while first, so that two
// controllers racing part). A refusal, or nothing to do, is the answer only
// once decided on read models caught up with the stream: they may not hold
// a write another controller answered a moment ago (the node enrolled
// there). op and id name what it changes in the sentence of a decision that
// other writes kept moving ("enroll", "web-1").
func (c *Core) DecideAtomic(ctx context.Context, op, id, commandID string, decide func(*projections.View) ([]store.One, error)) (uint64, []store.One, error) {
	if err := c.Writable(); err != nil {
		return 0, nil, err
	}
	var items []store.One
	read := func() error {
		return c.Proj.Read(func(v *projections.View) (err error) {
			items, err = decide(v)
			return err
		})
	}
	var seq uint64
	err := DecideAndAppend(ctx, op, id, c.CatchUp, func(attempt int) error {
		err := read()
		// Every attempt after the first follows a catch-up (the reread);
		// the first may be on read models behind the stream, so it does
		// not refuse, or do nothing, on them alone.
		var refusal *aggregates.Error
		if attempt == 0 && (errors.As(err, &refusal) || err == nil && len(items) == 0) {
			if err := c.CatchUp(ctx); err != nil {
				return err
			}
			err = read()
		}
		if err != nil || len(items) == 0 {
			return err
		}
		seq, err = c.Store.AppendAtomic(ctx, commandID, items)
		return err
	})
	if err != nil || len(items) == 0 {
		return 0, nil, err
	}
	return seq, items, c.Landed(ctx, seq, items[0].Event)
}

// CatchUp waits until the read models hold everything the stream holds now.
func (c *Core) CatchUp(ctx context.Context) error {
	st, err := c.Store.State(ctx)
	if err != nil {
		return err
	}
	return c.Proj.WaitFor(ctx, st.LastSeq)
}

// ActiveNode refuses a verb aimed at a node that is not enrolled or is
// retired, catching up first when the read models do not hold it.
func (c *Core) ActiveNode(ctx context.Context, op, name string) error {
	if err := ValidName(op, name); err != nil {
		return err
	}
	n, found, err := c.Proj.Node(name)
	if err == nil && !found {
		// Enrolled through another controller sharing the stream, perhaps,
		// and not folded here yet: catch up before saying there is none.
		if err := c.CatchUp(ctx); err != nil {
			return err
		}
		n, found, err = c.Proj.Node(name)
	}
	switch {
	case err != nil:
		return err
	case !found:
		return aggregates.Refuse(op, name, aggregates.ErrUnknownNode, "no node of that name is enrolled; see mesh node list")
	case n.Retired:
		return aggregates.Refuse(op, name, aggregates.ErrRetired, "it is retired, and a retired node is sent nothing")
	}
	return nil
}

// ValidName refuses a node name before it reaches a subject: a name with a
// space or a dot would otherwise fail deep in the store as "invalid subject".
func ValidName(op, name string) error {
	if err := events.ValidateName("node", name); err != nil {
		return aggregates.Refuse(op, fmt.Sprintf("%q", name), aggregates.ErrInvalid, err.Error())
	}
	return nil
}

// NotYetEnrolled says that name was not a node at the moment asked about,
// and when it became one if it is one now: "no node of that name is
// enrolled" would send the reader to node list, which shows it.
func (c *Core) NotYetEnrolled(name string, at time.Time) error {
	detail := "no node of that name was enrolled as of " + at.UTC().Format(time.RFC3339)
	if n, found, err := c.Proj.Node(name); err == nil && found {
		detail += "; it was enrolled at " + n.EnrolledAt.UTC().Format(time.RFC3339)
	}
	return aggregates.Refuse("show", name, aggregates.ErrUnknownNode, detail)
}

// Observe logs the bus's storage trouble once when a write first meets it,
// and once when a write lands again: a full disk is worth two lines in the
// controller's log, not one per command.
func (c *Core) Observe(err error) {
	switch {
	case errors.Is(err, store.ErrStorage):
		if !c.storageFull.Swap(true) {
			c.Log.Error(err.Error())
		}
	case err == nil:
		if c.storageFull.Swap(false) {
			c.Log.Info("the bus stores events again")
		}
	}
}

// TickUntilStopped runs step every interval, each run bounded by a minute
// (rule 26), until stop is called. A step that fails is said once, with
// what, and tried again at the next tick; the same failure again is not
// said again until a step has succeeded.
func (c *Core) TickUntilStopped(every time.Duration, what string, step func(context.Context) error) (stop func()) {
	// What a tick appends, the controller did by itself (a step may name
	// itself more closely: the reconciler, a rollout).
	ctx, cancel := context.WithCancel(events.WithBy(context.Background(), events.ActorController))
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(every)
		defer tick.Stop()
		said := ""
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			sctx, scancel := context.WithTimeout(ctx, time.Minute)
			err := step(sctx)
			scancel()
			switch {
			case err == nil:
				said = ""
			case err.Error() != said && ctx.Err() == nil:
				said = err.Error()
				c.Log.Warn(what, "err", err)
			}
		}
	}()
	return func() { cancel(); <-done }
}

// Code is the wire code a verb's error answers with: a refusal's kind
// decides it, so one refusal exits the command line one way.
func Code(err error) string {
	switch {
	case errors.Is(err, aggregates.ErrInvalid):
		return wire.CodeBadRequest
	case errors.Is(err, aggregates.ErrUnknownNode), errors.Is(err, aggregates.ErrUnknownModule), errors.Is(err, aggregates.ErrUnknown):
		return wire.CodeNotFound
	case errors.Is(err, aggregates.ErrNameTaken), errors.Is(err, aggregates.ErrRetired), errors.Is(err, aggregates.ErrUncomposable),
		errors.Is(err, aggregates.ErrContended), errors.Is(err, aggregates.ErrInUse):
		return wire.CodeConflict
	case errors.Is(err, aggregates.ErrForbidden):
		return wire.CodeForbidden
	case errors.Is(err, wire.ErrReadOnly), errors.Is(err, aggregates.ErrNotYet):
		return wire.CodeUnavailable
	}
	return wire.CodeInternal
}

// Progress publishes fold progress to subject, at most five times a second
// and always the last; nil when nobody asked.
func (c *Core) Progress(subject string) func(projections.Progress) {
	if subject == "" {
		return nil
	}
	var last time.Time
	return func(p projections.Progress) {
		if p.Folded < p.Total && time.Since(last) < 200*time.Millisecond {
			return
		}
		last = time.Now()
		rate := 0.0
		if p.Elapsed > 0 {
			rate = float64(p.Folded) / p.Elapsed.Seconds()
		}
		b, _ := json.Marshal(wire.FoldProgress{Folded: p.Folded, Total: p.Total, Rate: rate})
		c.Store.NC().Publish(subject, b)
	}
}

// PerNode is the command id of one node's append within a push (and a
// declare or a forget, which send one node): derived, so
// a retried push request stores nothing twice; the round, because a
// recomposed declaration is another decision.
//
// Its text is commandID, the hex of the node name's sha256's first 6
// bytes and the round, joined by dots. A push makes one a node, and
// fmt.Sprintf's were 1% of the controller's allocations a push; joined
// here it is one. It must not change: a request retried across an upgrade
// would store its events twice.
func PerNode(commandID, node string, round int) string {
	sum := sha256.Sum256([]byte(node))
	var h [2 * 6]byte
	hex.Encode(h[:], sum[:6])
	return commandID + "." + string(h[:]) + "." + strconv.Itoa(round)
}
