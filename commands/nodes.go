package commands

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/meshctl/mesh/aggregates"
	"github.com/meshctl/mesh/busauth"
	"github.com/meshctl/mesh/declaration"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/events/store"
	"github.com/meshctl/mesh/projections"
	"github.com/meshctl/mesh/secret"
	"github.com/meshctl/mesh/wire"
	"github.com/nats-io/nkeys"
)

// Handlers are the verbs, bound to one store and one set of read models.
// What the controller is (Self) is the same in the present and in the
// past: time travel (--as-of) makes handlers of the same Self over a fold
// of the past, so a field added to Self is there too, and one added below
// (a cache, live state) starts empty there, as it must.
type Handlers struct {
	Self
	Proj *projections.Engine
	Now  func() time.Time

	manifests manifests
	composed  composedCache
	held      heldCache
	// metrics is told what the controller does (nil: nothing).
	metrics Metrics
	// cutter ends live connections whose grant the log took away (nil on
	// an open bus, which grants nothing: grants.go).
	cutter *busauth.Cutter
	// past: these handlers answer from a fold of the past (--as-of), which
	// neither follows the stream nor can be behind it.
	past bool
	// storageFull: the last write met a bus that could not store it.
	storageFull atomic.Bool
	// bus is why the bus takes no events now, when it does not (its disk
	// failed a write, its directory is gone): writes are refused at once
	// with it, and those in flight are cut with it (bustrouble.go).
	bus busTrouble
	// autoSeen is the composition version at which no new build waited
	// for its auto rollout: a drive's tick reads no assignment until a
	// registration or an assignment moves it.
	autoSeen atomic.Uint64
	// live is what this controller hears of the agents (nil: liveness is
	// off, or these handlers answer from the past, which has only what
	// the log recorded).
	live *liveness
	// flood counts what each node writes on its report subjects (nil for
	// the past); cutUsers drops the connections of the users it matches on
	// a bus the controller runs (nil: a cluster's, which it cannot).
	flood    *floodWatch
	cutUsers func(match func(user string) bool) (int, error)
	// addressSeen is the composition version at which no active node
	// lacked an overlay address (DriveNetwork).
	addressSeen atomic.Uint64
}

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
	// secrets are the salts of secret settings (nil: none can be sealed
	// or opened, and a node that needs one is named as not composable).
	secrets *secretKeys
	// replicas is the stream's, which the buckets the controller makes
	// take too (rule 15).
	replicas int
}

// aggregate is what decide needs of one: folding its own events.
type aggregate interface {
	Apply(events.Recorded)
}

// decide loads an aggregate, asks it to decide, and appends the result
// expecting the version it loaded; on a conflict it loads and decides again
// (decideAndAppend). It answers the sequence of the last event appended (0
// when the command was already satisfied) after the read models have folded
// it. op and the aggregate's id name it in the sentence of a decision that
// other writes kept moving.
func decide[A aggregate](ctx context.Context, h *Handlers, op string, id events.AggregateID, commandID string,
	fresh func() A, decideFn func(A) ([]events.Event, error)) (uint64, error) {
	if err := h.writable(); err != nil {
		return 0, err
	}
	var seq uint64
	var evs []events.Event
	// No reread: each attempt loads the aggregate from the log itself.
	err := decideAndAppend(ctx, op, id.ID, nil, func(int) error {
		recs, version, err := h.Store.Load(ctx, id)
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
		seq, err = h.Store.Append(ctx, id, version, commandID, evs...)
		return err
	})
	if err != nil || seq == 0 {
		return 0, err
	}
	return seq, h.landed(ctx, seq, evs...)
}

// decideAtomic decides from the read models and appends the items as one
// atomic batch, each expecting the version its aggregate's row holds; when
// any moved meanwhile nothing landed, and it catches up and decides again
// (decideAndAppend, which pauses a random while first, so that two
// controllers racing part). A refusal, or nothing to do, is the answer only
// once decided on read models caught up with the stream: they may not hold
// a write another controller answered a moment ago (the node enrolled
// there). op and id name what it changes in the sentence of a decision that
// other writes kept moving ("enroll", "web-1").
func (h *Handlers) decideAtomic(ctx context.Context, op, id, commandID string, decide func(*projections.View) ([]store.One, error)) (uint64, []store.One, error) {
	if err := h.writable(); err != nil {
		return 0, nil, err
	}
	var items []store.One
	read := func() error {
		return h.Proj.Read(func(v *projections.View) (err error) {
			items, err = decide(v)
			return err
		})
	}
	var seq uint64
	err := decideAndAppend(ctx, op, id, h.catchUp, func(attempt int) error {
		err := read()
		// Every attempt after the first follows a catch-up (the reread);
		// the first may be on read models behind the stream, so it does
		// not refuse, or do nothing, on them alone.
		var refusal *aggregates.Error
		if attempt == 0 && (errors.As(err, &refusal) || err == nil && len(items) == 0) {
			if err := h.catchUp(ctx); err != nil {
				return err
			}
			err = read()
		}
		if err != nil || len(items) == 0 {
			return err
		}
		seq, err = h.Store.AppendAtomic(ctx, commandID, items)
		return err
	})
	if err != nil || len(items) == 0 {
		return 0, nil, err
	}
	return seq, items, h.landed(ctx, seq, items[0].Event)
}

// Enroll adds a node, with its overlay address when the network is set. A
// name taken by any node, retired or not, is refused.
func (h *Handlers) Enroll(ctx context.Context, r wire.EnrollRequest) (wire.Changed, error) {
	if err := validName("enroll", r.Name); err != nil {
		return wire.Changed{}, err
	}
	// Read models that do not hold the network yet would enrol the node
	// without an address: caught up first when they say there is none
	// (the drive gives one to a node that slips past even so).
	if err := h.writable(); err != nil {
		return wire.Changed{}, err
	}
	var set bool
	if err := h.Proj.Read(func(v *projections.View) (err error) { _, set, err = v.Network(); return err }); err != nil {
		return wire.Changed{}, err
	}
	if !set {
		if err := h.catchUp(ctx); err != nil {
			return wire.Changed{}, err
		}
	}
	seq, _, err := h.withPool(ctx, "enroll", r.Name, r.CommandID, func(v *projections.View, pool *aggregates.Pool) ([]store.One, error) {
		items, _, err := h.enrollItems(v, pool, []wire.EnrollRequest{r}, false)
		return items, err
	})
	if err != nil {
		return wire.Changed{}, err
	}
	h.Log.Info("node enrolled", "node", r.Name, "seq", seq)
	c, err := h.changed(r.Name, seq)
	if err != nil {
		return c, err
	}
	c.Identity, err = h.nodeToken(ctx, r.Name, false)
	return c, err
}

// Retire takes a node out of service for good, giving its overlay address
// back; retiring a retired node is answered as nothing to do.
func (h *Handlers) Retire(ctx context.Context, r wire.RetireRequest) (wire.Changed, error) {
	if err := validName("retire", r.Name); err != nil {
		return wire.Changed{}, err
	}
	seq, _, err := h.withPool(ctx, "retire", r.Name, r.CommandID, func(v *projections.View, pool *aggregates.Pool) ([]store.One, error) {
		return h.retireItems(v, pool, r.Name)
	})
	if err != nil {
		return wire.Changed{}, err
	}
	if seq != 0 {
		h.Log.Info("node retired", "node", r.Name, "seq", seq)
	}
	return h.changed(r.Name, seq)
}

// ChangeNode replaces a node's declared capabilities and labels (each when
// given). What it would be sent follows: plan and push --behind show it.
func (h *Handlers) ChangeNode(ctx context.Context, r wire.ChangeNodeRequest) (wire.Changed, error) {
	if err := validName("change", r.Name); err != nil {
		return wire.Changed{}, err
	}
	if r.Capabilities == nil && r.Labels == nil {
		return wire.Changed{}, aggregates.Refuse("change", r.Name, aggregates.ErrInvalid, "give --capability or --label (or --clear-capabilities, --clear-labels): there is nothing to change")
	}
	seq, _, err := h.decideAtomic(ctx, "change", r.Name, r.CommandID, func(v *projections.View) ([]store.One, error) {
		n, err := nodeAggregateOf(v, r.Name)
		if err != nil {
			return nil, err
		}
		evs, err := n.Decide(aggregates.ChangeNode{Name: r.Name, Capabilities: r.Capabilities, Labels: r.Labels}, h.Now())
		if err != nil || len(evs) == 0 {
			return nil, err
		}
		return []store.One{{Aggregate: events.NodeAggregate(r.Name), Expected: n.Version, Event: evs[0]}}, nil
	})
	if err != nil {
		return wire.Changed{}, err
	}
	if seq != 0 {
		h.Log.Info("node changed", "node", r.Name, "seq", seq)
	}
	return h.changed(r.Name, seq)
}

func (h *Handlers) changed(name string, seq uint64) (wire.Changed, error) {
	var out wire.Changed
	err := h.Proj.Read(func(v *projections.View) error {
		n, found, err := v.Node(name)
		if err != nil {
			return err
		}
		if !found {
			return fmt.Errorf("node %s was written at %d but the read models do not hold it", name, seq)
		}
		out = wire.Changed{Changed: seq != 0, Seq: seq}
		out.Node, err = nodeView(v, n)
		return err
	})
	return out, err
}

// nodeView is a node's row with its assignments and, for each, the latest build.
func nodeView(v *projections.View, n projections.Node) (wire.NodeView, error) {
	nv := viewOf(n)
	var err error
	if nv.Address, err = v.AddressOf(n.Name); err != nil {
		return nv, err
	}
	as, err := v.AssignmentsOf(n.Name)
	if err != nil {
		return nv, err
	}
	for _, a := range as {
		m, _, err := v.Module(a.Module)
		if err != nil {
			return nv, err
		}
		nv.Assignments = append(nv.Assignments, assignmentView(a, m.Latest))
	}
	return nv, nil
}

// ListNodes answers every node from the read models. Every assignment and
// every module row is read once, in one scan each: a lookup per node, and
// one module's row decoded again for each of its ten thousand nodes, were
// most of node list's time. Brief leaves out what the table does not show.
func (h *Handlers) ListNodes(_ context.Context, r wire.ListRequest) (wire.NodeList, error) {
	out := wire.NodeList{Nodes: []wire.NodeView{}}
	err := h.Proj.Read(func(v *projections.View) error {
		nodes, err := v.Nodes()
		if err != nil {
			return err
		}
		out.Nodes = make([]wire.NodeView, 0, len(nodes))
		addresses, err := v.NodeAddresses()
		if err != nil {
			return err
		}
		lives, err := v.Liveness()
		if err != nil {
			return err
		}
		// reach is what node list says of a node's liveness.
		reach := func(nv *wire.NodeView) {
			if lv := lives[nv.Name]; lv.Unreachable && !nv.Retired {
				nv.UnreachableSince = &lv.Since
			}
			if at := h.LastHeard(nv.Name); !at.IsZero() {
				nv.LastHeard = &at
			}
		}
		if r.Brief {
			for _, n := range nodes {
				nv := wire.NodeView{Name: n.Name, Capabilities: n.Capabilities, Labels: n.Labels,
					Retired: n.Retired, EnrolledAt: n.EnrolledAt, Address: addresses[n.Name]}
				reach(&nv)
				out.Nodes = append(out.Nodes, nv)
			}
			return nil
		}
		latest, err := latestBuilds(v)
		if err != nil {
			return err
		}
		all, err := v.Assignments() // by node, then module
		if err != nil {
			return err
		}
		for _, n := range nodes {
			nv := viewOf(n)
			nv.Address = addresses[n.Name]
			reach(&nv)
			// Both lists are in name order: walk them together.
			for len(all) > 0 && all[0].Node < n.Name {
				all = all[1:]
			}
			for len(all) > 0 && all[0].Node == n.Name {
				nv.Assignments = append(nv.Assignments, assignmentView(all[0], latest[all[0].Module]))
				all = all[1:]
			}
			out.Nodes = append(out.Nodes, nv)
		}
		return nil
	})
	return out, err
}

// latestBuilds is each module's latest build, by module name.
func latestBuilds(v *projections.View) (map[string]string, error) {
	mods, err := v.Modules()
	latest := make(map[string]string, len(mods))
	for _, m := range mods {
		latest[m.Name] = m.Latest
	}
	return latest, err
}

func assignmentView(a projections.AssignmentRow, latest string) wire.AssignmentView {
	settings := make(map[string]string, len(a.Settings))
	for k, v := range a.Settings {
		settings[k] = secret.Shown(v) // a secret as set and its version (rule 21)
	}
	return wire.AssignmentView{Module: a.Module, Build: a.Build, Latest: latest, Settings: settings, Policy: a.Policy.Or()}
}

// ShowNode answers one node, or says it is not enrolled.
func (h *Handlers) ShowNode(ctx context.Context, r wire.NameRequest) (wire.NodeView, error) {
	if !r.AsOf.IsZero() {
		var out wire.NodeView
		err := h.inThePast(ctx, r.AsOf, func(past *Handlers) (err error) {
			out, err = past.ShowNode(ctx, wire.NameRequest{Name: r.Name})
			return err
		})
		if errors.Is(err, aggregates.ErrUnknownNode) {
			err = h.notYetEnrolled(r.Name, r.AsOf)
		}
		out.AsOf = &r.AsOf
		return out, err
	}
	if err := validName("show", r.Name); err != nil {
		return wire.NodeView{}, err
	}
	var out wire.NodeView
	var row projections.Node
	var drifts map[string]projections.Drift
	var holds map[string]string
	var live projections.Liveness
	err := h.Proj.Read(func(v *projections.View) error {
		causes, err := h.causes(ctx, v)
		if err != nil {
			return err
		}
		n, found, err := v.Node(r.Name)
		if err != nil {
			return err
		}
		if !found {
			return aggregates.Refuse("show", r.Name, aggregates.ErrUnknownNode, "no node of that name is enrolled; see mesh node list")
		}
		if out, err = nodeView(v, n); err != nil {
			return err
		}
		standings, err := v.Standings()
		hosts := map[string]bool{}
		for _, a := range out.Assignments {
			hosts[a.Module] = true
		}
		for _, s := range standings {
			if s.Machine == n.Name || hosts[s.Consumer] {
				out.Standings = append(out.Standings, wire.StandingView(s))
			}
		}
		if err != nil {
			return err
		}
		if out.Runtimes, err = v.RuntimesOf(n.Name); err != nil {
			return err
		}
		if f, found, err := v.NodeFacts(n.Name); err != nil {
			return err
		} else if found {
			out.Facts, out.Detected = f.Facts, f.Capabilities
		}
		if drifts, err = v.Drifts(); err != nil {
			return err
		}
		if holds, err = holdsOf(v, n.Name); err != nil {
			return err
		}
		if live, err = v.NodeLiveness(n.Name); err != nil {
			return err
		}
		if live.Unreachable {
			out.UnreachableSince = &live.Since
		}
		for i, rt := range out.Runtimes {
			out.Runtimes[i] = runtimeOn(rt, live)
		}
		if at := h.LastHeard(n.Name); !at.IsZero() {
			out.LastHeard = &at
		}
		row = n
		out.Causes = causes
		return nil
	})
	if err != nil || row.Retired {
		return out, err
	}
	composed, err := h.composeAll()
	if err != nil {
		return out, err
	}
	w := composed[r.Name]
	state, since, detail := stateOf(row, w)
	state, detail = partial(state, detail, w)
	state, detail = drifted(state, detail, row, drifts)
	state, detail = held(state, detail, holds[r.Name])
	state, since, detail = unreachable(state, since, detail, live)
	out.State, out.Since, out.Detail, out.WouldSend = state, &since, detail, w.contentDigest
	out.LeftOut, out.Unresolved = w.leftOut, w.unresolved
	return out, nil
}

// ProjectionsStatus says where the read models stand against the stream.
func (h *Handlers) ProjectionsStatus(ctx context.Context, _ wire.Empty) (wire.StatusReply, error) {
	return h.Proj.Status(ctx)
}

// RebuildProjections folds the stream into fresh read models and swaps them in.
func (h *Handlers) RebuildProjections(ctx context.Context, req wire.FoldRequest) (wire.RebuildReply, error) {
	restoreGC := foldingGC()
	r, err := h.Proj.Rebuild(ctx, h.progress(req.Progress))
	restoreGC()
	if err != nil {
		return wire.RebuildReply{}, err
	}
	h.Log.Info("projections rebuilt", "from", r.From, "to", r.To, "events", r.Events, "seconds", r.Elapsed.Seconds())
	return wire.RebuildReply{From: r.From, To: r.To, Events: r.Events, Checkpoint: r.Checkpoint, Seconds: r.Elapsed.Seconds()}, nil
}

// validName refuses a node name before it reaches a subject: a name with a
// space or a dot would otherwise fail deep in the store as "invalid subject".
func validName(op, name string) error {
	if err := events.ValidateName("node", name); err != nil {
		return aggregates.Refuse(op, fmt.Sprintf("%q", name), aggregates.ErrInvalid, err.Error())
	}
	return nil
}

// notYetEnrolled says that name was not a node at the moment asked about,
// and when it became one if it is one now: "no node of that name is
// enrolled" would send the reader to node list, which shows it.
func (h *Handlers) notYetEnrolled(name string, at time.Time) error {
	detail := "no node of that name was enrolled as of " + at.UTC().Format(time.RFC3339)
	if n, found, err := h.Proj.Node(name); err == nil && found {
		detail += "; it was enrolled at " + n.EnrolledAt.UTC().Format(time.RFC3339)
	}
	return aggregates.Refuse("show", name, aggregates.ErrUnknownNode, detail)
}
