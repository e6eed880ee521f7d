package push

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/meshctl/mesh/aggregates"
	"github.com/meshctl/mesh/commands/core"
	"github.com/meshctl/mesh/commands/world"
	"github.com/meshctl/mesh/compose"
	"github.com/meshctl/mesh/declaration"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/events/store"
	"github.com/meshctl/mesh/fanout"
	"github.com/meshctl/mesh/projections"
	"github.com/meshctl/mesh/wire"
)

// Push composes, signs and sends a declaration to each target node. Each is
// numbered at composition (the node's last sequence + 1) and appended
// expecting the version of the node's aggregate it was composed at, so a
// declaration composed before an assignment changed can never land after one
// composed after it. The appended DeclarationSent event is the delivery. A
// node that cannot be composed is named and skipped; every other is sent.
func (h *Service) Push(ctx context.Context, r wire.PushRequest) (wire.PushReply, error) {
	if err := h.Writable(); err != nil {
		return wire.PushReply{}, err
	}
	only, within, err := h.PushScope(ctx, "push to", r)
	if err != nil {
		return wire.PushReply{}, err
	}
	reply := wire.PushReply{Sent: []wire.PushedNode{}, Unsent: []wire.UnsentNode{}}
	var last uint64
	progress, started := h.Progress(r.Progress), time.Now()
	// A round composes and appends every node still to send; the nodes
	// whose aggregate moved between composing and appending (an
	// assignment, another push) are composed again in the next round
	// (decideAndAppend), from read models caught up to hold the move.
	err = core.DecideAndAppend(ctx, "push to", "its nodes", h.CatchUp, func(round int) error {
		sel, err := h.SelectTargets(only, within, r, round)
		if err != nil {
			return err
		}
		// A push over every node composes every node but those a hand
		// holds: what it composed is kept for the status after it.
		var keep map[string]world.Would
		if round == 0 {
			reply.Considered, reply.Held = len(sel.targets), sel.held
			// Nearly every target is sent in the first round (sealWindow).
			reply.Sent = slices.Grow(reply.Sent, len(sel.targets))
			if only == nil && within == nil && !r.Behind && !h.Holds(sel.at) {
				keep = make(map[string]world.Would, len(sel.targets))
			}
		}
		only = map[string]bool{}
		// A window at a time: composed, sealed, appended, let go. Ten
		// thousand sealed declarations held at once were most of the
		// controller's peak memory in a push. Each window reuses the
		// last one's lists (scratch).
		var scratch windowScratch
		for start := 0; start < len(sel.targets); start += pushWindow {
			end := min(start+pushWindow, len(sel.targets))
			batch, unsent := h.sealWindow(sel, sel.targets[start:end], sel.rows[start:end], r, round, keep, &scratch)
			reply.Unsent = append(reply.Unsent, unsent...)
			outcomes, err := h.Store.AppendMany(ctx, batch.items)
			if err != nil {
				return err
			}
			for i, o := range outcomes {
				p := batch.pushed[i]
				switch {
				case errors.Is(o.Err, store.ErrConflict), errors.Is(o.Err, store.ErrUnsure) && r.Once:
					// A caller that decides again (a rollout's drive, the
					// reconciler) does so for a send it cannot tell landed
					// too, from read models that will hold it if it did:
					// unsent, it halted a rollout's wave over a bus's blip.
					// A push asked by hand says it unsent, with why.
					only[p.Node] = true
				case o.Err != nil:
					reply.Unsent = append(reply.Unsent, wire.UnsentNode{Node: p.Node, Reason: o.Err.Error()})
				default:
					p.StreamSeq = o.Seq
					last = max(last, o.Seq)
					reply.Sent = append(reply.Sent, p)
				}
			}
			if progress != nil && round == 0 {
				done := uint64(len(reply.Sent) + len(reply.Unsent) + len(only))
				progress(projections.Progress{Folded: done, Total: uint64(reply.Considered), Elapsed: time.Since(started)})
			}
		}
		if keep != nil {
			h.Keep(sel.at, keep)
		}
		if len(only) == 0 {
			return nil
		}
		if r.Once {
			// A node that moved since the read models looked was acted on
			// by someone else (another controller's step): the caller
			// decides on it again, rather than this push sending it twice.
			only = nil
			return nil
		}
		return store.ErrConflict // some moved: compose those again
	})
	// Other writes kept moving the nodes still in only: each is unsent
	// with the one sentence, and the push answers what it did send.
	var contention *aggregates.Error
	if errors.As(err, &contention) && contention.Err == aggregates.ErrContended {
		for n := range only {
			reply.Unsent = append(reply.Unsent, wire.UnsentNode{Node: n, Reason: contention.Detail})
		}
	} else if err != nil {
		return reply, err
	}
	if len(reply.Sent) > 0 {
		h.Log.Info("pushed", "sent", len(reply.Sent), "unsent", len(reply.Unsent))
	}
	if h.Metrics != nil {
		h.Metrics.Push(len(reply.Sent), len(reply.Unsent), time.Since(started))
	}
	if last == 0 {
		return reply, nil
	}
	return reply, h.Landed(ctx, last, events.DeclarationSent{})
}

// PushScope reads which nodes a push (or its plan, op) is about: only the
// named node (nil: every target the first round finds), within the nodes
// its selector or list chooses (nil: no bound).
func (h *Service) PushScope(ctx context.Context, op string, r wire.PushRequest) (only, within map[string]bool, err error) {
	if r.Node != "" && r.Behind {
		return nil, nil, aggregates.Refuse(op, r.Node, aggregates.ErrInvalid, "name a node or give --behind, not both: a named node is pushed whether it is behind or not")
	}
	if r.Node != "" {
		if err := h.ActiveNode(ctx, op, r.Node); err != nil {
			return nil, nil, err
		}
		only = map[string]bool{r.Node: true}
	}
	within, err = h.Within(ctx, r)
	return only, within, err
}

// Within is the set of nodes a push's selector chooses, nil for none.
func (h *Service) Within(ctx context.Context, r wire.PushRequest) (map[string]bool, error) {
	if len(r.Nodes) > 0 {
		out := make(map[string]bool, len(r.Nodes))
		for _, n := range r.Nodes {
			out[n] = true
		}
		return out, nil
	}
	if r.Selector == "" {
		return nil, nil
	}
	if r.Node != "" {
		return nil, aggregates.Refuse("push", r.Node, aggregates.ErrInvalid, "name a node or give --selector, not both")
	}
	sel, err := h.SelectNodes(ctx, wire.SelectRequest{Selector: r.Selector})
	if err != nil {
		return nil, err
	}
	out := make(map[string]bool, len(sel.Nodes))
	for _, n := range sel.Nodes {
		out[n] = true
	}
	return out, nil
}

type pushBatch struct {
	items  []store.One
	pushed []wire.PushedNode
}

// windowScratch is what sealWindow makes for a window and a push's next
// window uses again: a window's composed nodes (some 2,000 sealedNodes of
// half a kilobyte), its items and pushed nodes were a tenth of the bytes
// the controller allocated over a push (an allocation profile of mesh
// bench, issue 34), each made afresh for every window. What they held is
// done with once a window is appended: AppendMany keeps no item (it
// remembers each event by value), and the reply copies each pushed node.
type windowScratch struct {
	results  []sealedNode
	composed []int
	batch    pushBatch
}

// grow makes s's lists hold n, empty: results zeroed, so nothing of the
// window before is kept alive by them or read as this one's.
func (s *windowScratch) grow(n int) {
	if cap(s.results) < n {
		s.results = make([]sealedNode, n)
		s.batch = pushBatch{items: make([]store.One, 0, n), pushed: make([]wire.PushedNode, 0, n)}
	}
	s.results = s.results[:n]
	clear(s.results)
	clear(s.batch.items[:cap(s.batch.items)])
	clear(s.batch.pushed[:cap(s.batch.pushed)])
	s.batch.items, s.batch.pushed, s.composed = s.batch.items[:0], s.batch.pushed[:0], s.composed[:0]
}

// pushWindow is how many declarations a push seals and appends at a time
// (a variable for the test that holds a push in windows to one in a
// single window).
var pushWindow = 2000

// sealWindow composes and seals the declarations of names. Composing is
// pure and independent per node: a worker per core, results kept in
// order. Then the composed are signed declaration.WindowSize at a time,
// one signature a window (issue 34: a signature each was a sixth of the
// controller's CPU a pushed node), the windows again a worker per core.
// What each node composed to goes into keep, when not nil.
func (h *Service) sealWindow(t targets, names []string, rows []sendRow, r wire.PushRequest, round int, keep map[string]world.Would, s *windowScratch) (pushBatch, []wire.UnsentNode) {
	// Sized once: grown by appending, these and the reply's list were
	// some 4% of the bytes the controller allocated over pushes to 10,000
	// nodes, each doubling copied.
	s.grow(len(names))
	b := s.batch
	var unsent []wire.UnsentNode
	by := cmp.Or(r.By, "push")
	results := s.results
	fanout.PerCore(len(names), func(i int) {
		results[i] = h.compose(t.w, rows[i], by, t.now)
	})
	composed := s.composed
	for i, res := range results {
		if res.unsent == "" {
			composed = append(composed, i)
		}
	}
	s.composed = composed
	const w = declaration.WindowSize
	fanout.PerCore((len(composed)+w-1)/w, func(g int) {
		window := composed[g*w : min((g+1)*w, len(composed))]
		bs := make([][]byte, len(window))
		for j, i := range window {
			bs[j] = results[i].bytes
		}
		for j, s := range h.Signer.SealManyBytes(bs) {
			res := &results[window[j]]
			res.ev = sent(res.d, s, res.contentDigest, by)
		}
	})
	for i, res := range results {
		name := names[i]
		if keep != nil {
			keep[name] = res.would
		}
		if res.unsent != "" {
			unsent = append(unsent, wire.UnsentNode{Node: name, Reason: res.unsent})
			continue
		}
		b.items = append(b.items, store.One{Aggregate: events.NodeAggregate(name), Expected: rows[i].version,
			CommandID: core.PerNode(r.CommandID, name, round), Event: res.ev})
		b.pushed = append(b.pushed, wire.PushedNode{Node: name, Sequence: res.ev.Sequence, Digest: res.ev.Digest, Resources: res.ev.Resources,
			Note: joinNotes(t.notes[name], res.note)})
	}
	return b, unsent
}

// joinNotes is a sent node's note: why it was sent and what composing it
// said, either or both. Most nodes have neither: joining the two with
// strings.Join and trimming the separator off made a string for each.
func joinNotes(why, composed string) string {
	switch {
	case why == "":
		return composed
	case composed == "":
		return why
	}
	return why + "; " + composed
}

// sealedNode is one node of a push's window: composed and numbered (d),
// then signed (ev), or why it is not sent.
type sealedNode struct {
	d declaration.Declaration
	// bytes are d's canonical bytes, spliced from the content's that
	// compose encoded already (declaration.CanonicalFrom).
	bytes         []byte
	contentDigest string
	ev            events.DeclarationSent
	unsent        string
	note          string
	would         world.Would
}

func (h *Service) compose(w *compose.World, row sendRow, by string, now time.Time) sealedNode {
	res := w.Compose(row.name)
	if !res.Composable() {
		return sealedNode{unsent: res.Reason(), would: world.Of(res)}
	}
	out := sealedNode{would: world.Of(res)}
	out.d, out.contentDigest, out.note = number(*res.Declaration, composedDigest(res), row, now)
	out.bytes = out.d.CanonicalFrom(res.Bytes)
	if len(res.LeftOut) > 0 {
		out.note = strings.TrimPrefix(out.note+"; "+fmt.Sprintf("%d left out: %s", len(res.LeftOut), res.LeftOut[0].Reason), "; ")
	}
	return out
}

// composedDigest is the content digest of what compose made, which it
// digested already: the same bytes declaration.ContentDigest would encode
// and hash again (a tenth of a push's CPU that is not signing, issue 34),
// as long as none of its lists is nil, which Content would make empty.
// "" otherwise, and the seal digests the content itself.
func composedDigest(res compose.Result) string {
	if d := res.Declaration; d.Modules == nil || d.Resources == nil || d.Receives == nil {
		return ""
	}
	return res.Digest
}

// Seal numbers (aggregates.NumberDeclaration), chains and signs content
// for the node in row, alone (a push signs a window at a time).
func (h *Service) Seal(content compose.Declaration, row projections.Node, by string, at time.Time) (events.DeclarationSent, string) {
	d, contentDigest, note := number(content, "", sendRowOf(row), at)
	return sent(d, h.Signer.Seal(d), contentDigest, by), note
}

// number puts content in its envelope for the node in row: its sequence
// (aggregates.NumberDeclaration), its chain, its time. contentDigest is
// the content's digest when the caller knows it ("" when not: digested
// here).
func number(content compose.Declaration, contentDigest string, row sendRow, at time.Time) (declaration.Declaration, string, string) {
	seq, note := aggregates.NumberDeclaration(row.name, row.last.Sequence, row.refused)
	previous := row.last.Digest
	d := declaration.New(content, seq, previous, at)
	if contentDigest == "" {
		contentDigest = d.ContentDigest()
	}
	return d, contentDigest, note
}

// sent is the event that delivers d, sealed as s.
func sent(d declaration.Declaration, s declaration.Sealed, contentDigest, by string) events.DeclarationSent {
	return events.DeclarationSent{
		Node: d.Node, Sequence: d.Sequence, Digest: s.Digest(), ContentDigest: contentDigest, By: by,
		Resources: len(d.Resources), Declaration: s.Bytes, Signature: s.Signature, Key: s.Key, Proof: s.Proof,
	}
}

// sameFailureFor is docs/status.md's "for over six hours" of push --behind: a node failing the same way this
// long is pushed anyway, with a note that timing is unlikely to be the cause.
const sameFailureFor = 6 * time.Hour

// consequence reports whether other, linked to the named node (it hosts
// a provider of what the named node's modules consume, or a consumer of
// what they provide: compose.World.Linked), would now be sent something
// other than it was. Linked, not only receiving: when the named consumer's
// chosen provider moves, the provider it left must drop its credential in
// the same push as the one chosen takes it.
func consequence(other string, row projections.Node, composed *world.Composed) bool {
	w := composed.Of(other)
	return w.Composable && (row.LastSent == nil || row.LastSent.ContentDigest != w.ContentDigest)
}
