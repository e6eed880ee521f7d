package world

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/meshctl/mesh/compose"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/fanout"
	"github.com/meshctl/mesh/projections"
	"github.com/meshctl/mesh/verdict"
)

// Would is what composition says of one node now. It is at most 128
// bytes (TestAWouldFitsInItsMapSlot): a map keeps a larger value in an
// object of its own, so the would-sends of 100,000 nodes were 100,000
// objects and a lookup one cache miss more (issue 34). What most nodes
// lack is behind Short.
type Would struct {
	// verdict.Would is what the verdict reads: composable, the content
	// digest, or why not.
	verdict.Would
	// Short is what composition left out of the node or could not
	// resolve for it; nil when nothing was.
	Short    *Shortfall
	Receives []compose.Receipt
	Chosen   []compose.Chosen // each of Receives, with why
}

// Shortfall is what composition could not give one node.
type Shortfall struct {
	LeftOut    []compose.LeftOut
	Unresolved []compose.Unresolved
}

// LeftOut is each module, or unit of one, the node cannot host.
func (w Would) LeftOut() []compose.LeftOut {
	if w.Short == nil {
		return nil
	}
	return w.Short.LeftOut
}

// Unresolved is each requirement of the node's consumers the mesh cannot
// satisfy.
func (w Would) Unresolved() []compose.Unresolved {
	if w.Short == nil {
		return nil
	}
	return w.Short.Unresolved
}

// composedCache holds every node's would-send content digest for one
// composition version. Reports, sends and standings do not move that
// version, so status on a busy mesh reads digests instead of composing.
// It is also the memory of since when each node could not be composed:
// the next version's nodes carry it on while they stay so. And with the
// input it was composed from, the next version composes only the nodes
// its change can move (Changed): at 100,000 nodes the first status after
// one assignment composed them all again, 3.9 CPU s (issue 34).
type composedCache struct {
	mu      sync.Mutex
	version uint64
	// forgets is the secrets' count of dropped salts the nodes were
	// composed at (At says why it is part of the key).
	forgets uint64
	valid   bool
	nodes   *Composed
	in      compose.Input
	// memo is what Memo made of nodes, nil until asked.
	memo any
	// order is nodes' in their names' order, which Walk reads: made
	// where every node's would-send is at hand (Keep, a whole
	// composition, a patch of the order before).
	order order
}

// momentWait bounds reading the moment of a composition version's event:
// a status must not hang on the log for a since.
const momentWait = 2 * time.Second

// ComposeAll answers what every active node would be sent now, from the
// cache when the read models' composition version has not moved.
func (h *Composer) ComposeAll() (*Composed, error) {
	for {
		var at At
		hit := false
		forgets := h.Secrets.Forgets() // before the input is read: see At
		err := h.Proj.Read(func(v *projections.View) (err error) {
			version := v.CompositionVersion()
			if _, hit = h.composed.get(version, forgets); hit {
				at.Version, at.Forgets = version, forgets
				return nil // no need to read composition's input
			}
			// The world a push indexed at this version, if it did.
			at, err = h.At(v)
			return err
		})
		if err != nil {
			return nil, err
		}
		if !hit {
			return h.composedAt(at), nil
		}
		if nodes, ok := h.composed.get(at.Version, at.Forgets); ok {
			return nodes, nil
		}
		// Another caller cached a newer version meanwhile: read again.
	}
}

// WouldOf is every node's would-send at at for the nodes of names alone
// (every node when names is nil): from the cache when it holds the
// version, else composing only those, and caching nothing, since a few
// nodes are not the mesh. A push naming one node composed all 100,000
// after each assignment.
func (h *Composer) WouldOf(at At, names map[string]bool) *Composed {
	if nodes, ok := h.composed.get(at.Version, at.Forgets); ok {
		return nodes
	}
	if names == nil {
		return h.composedAt(at)
	}
	list := slices.Collect(maps.Keys(names))
	results := make([]Would, len(list))
	fanout.PerCore(len(list), func(i int) { results[i] = Of(at.World.Compose(list[i])) })
	nodes := make(map[string]Would, len(list))
	for i, n := range list {
		nodes[n] = results[i]
	}
	return composedOf(nodes)
}

// Keep caches what a push composed of the nodes of composed at at, with
// the nodes it did not compose (those a hand holds) composed here: the
// status after a push composed all 100,000 nodes again, 3.8 CPU s, though
// the push had just composed them from the same world (issue 34).
// composed is the cache's from then on: the caller lets it go.
func (h *Composer) Keep(at At, composed map[string]Would) {
	if _, ok := h.composed.get(at.Version, at.Forgets); ok {
		return
	}
	// The order is made on the way, in the world's name order: the
	// lookup a node that finds what the push did not compose is the one
	// the first status at this version made to build it, a fifth of that
	// status's CPU at 100,000 nodes. The since moves only nodes that
	// cannot be composed, which are never plain.
	names := at.World.Nodes()
	o := make(order, len(names))
	var missing []int
	for i, n := range names {
		if w, ok := composed[n]; ok {
			o[i] = entry(n, w)
		} else {
			missing = append(missing, i)
		}
	}
	results := make([]Would, len(missing))
	fanout.PerCore(len(missing), func(k int) { results[k] = Of(at.World.Compose(names[missing[k]])) })
	for k, i := range missing {
		composed[names[i]] = results[k]
		o[i] = entry(names[i], results[k])
	}
	h.sinceCannotCompose(at.Version, composed, h.composed.lastAt(), names)
	h.composed.put(at, composedOf(composed), o)
}

// Of is what one composition's result says of its node.
func Of(r compose.Result) Would {
	out := Would{Would: verdict.Would{Composable: r.Composable(), ContentDigest: r.Digest, Reason: r.Reason()}}
	if len(r.LeftOut) > 0 || len(r.Unresolved) > 0 {
		out.Short = &Shortfall{LeftOut: r.LeftOut, Unresolved: r.Unresolved}
	}
	if r.Declaration != nil {
		out.Receives, out.Chosen = r.Declaration.Receives, r.Chosen
	}
	return out
}

// composedAt is every node's would-send at at, cached. When the cache
// holds an older version at the same forgets, only the nodes its input's
// change can move are composed (Changed), and the rest are the older
// version's: what they would be sent cannot have moved.
func (h *Composer) composedAt(at At) *Composed {
	if nodes, ok := h.composed.get(at.Version, at.Forgets); ok {
		return nodes
	}
	var names []string
	var prev cachedAt // the older version this one is patched from, if it is
	var changed map[string]bool
	// What the since of each node that cannot be composed is carried
	// from: the older version the rest are kept from, when they are, so
	// both are judged against one composition (another caller may cache
	// a version meanwhile); else the newest cached.
	sinceFrom := h.composed.lastAt()
	patch := false
	if before, ok := h.composed.before(at); ok {
		if at.patchedFrom != 0 && before.version == at.patchedFrom {
			changed, patch = changedAmong(before.in, at.Input, at.touched)
		} else {
			changed, patch = Changed(before.in, at.Input)
		}
		if patch {
			// Only the changed nodes are composed: a node the world no
			// longer has (retired) changed, so it is among them, and is
			// left out. The rest are the older version's, shared with it
			// (Composed), not copied: a copy of its map was 19 MB and
			// 0.01 CPU s of the first status after one label change at
			// 100,000 nodes (issue 34).
			prev, sinceFrom = before, before
			for n := range changed {
				if at.World.Has(n) {
					names = append(names, n)
				}
			}
		}
	}
	if !patch {
		names = at.World.Nodes()
	}
	results := make([]Would, len(names))
	fanout.PerCore(len(names), func(i int) { results[i] = Of(at.World.Compose(names[i])) })
	fresh := make(map[string]Would, len(names))
	for i, n := range names {
		fresh[n] = results[i]
	}
	// Unless whole, the rest are the older version's, since and all.
	h.sinceCannotCompose(at.Version, fresh, sinceFrom, names)
	// After the since: an entry of the order is plain only with none.
	var o order
	var nodes *Composed
	if !patch {
		// Every node composed, in name order (World.Nodes): the order is
		// at hand, where the first status at this version made it by a
		// lookup in the map a node, a fifth of that status's CPU at
		// 100,000 nodes. The since moves only nodes that cannot be
		// composed, which are never plain.
		o = make(order, len(names))
		for i, n := range names {
			o[i] = entry(n, results[i])
		}
		nodes = composedOf(fresh)
	} else {
		o = prev.order.after(changed, fresh)
		nodes = prev.nodes.patched(changed, fresh)
	}
	h.composed.put(at, nodes, o)
	return nodes
}

// sinceCannotCompose says since when each node that cannot be composed at
// version could not be: since the last composition said so, if it did and
// is not newer, else since the event that moved composition to version.
// Not the node's enrolment (issue 31): a node enrolled a year ago whose
// provider was unassigned an hour ago cannot be composed since an hour
// ago. A version nobody composed (no status or push between two changes)
// is not seen, so the moment is the first change after which it was
// found so; after a start, the newest change at the latest. last is the
// composition before (the cache's). Only the nodes of composed, those
// composed now, are looked at: in a patch the others' would-sends are
// last's, since and all (its map copied), and a walk of all 100,000
// entries to find so was some 5 ms of the first status after a label
// change (issue 34).
func (h *Composer) sinceCannotCompose(version uint64, nodes map[string]Would, last cachedAt, composed []string) {
	prevVersion, prev := last.version, last.nodes
	var at time.Time
	for _, n := range composed {
		w, ok := nodes[n]
		if !ok || w.Composable {
			continue
		}
		if p, ok := prev.Lookup(n); ok && !p.Composable && !p.Since.IsZero() && prevVersion <= version {
			w.Since = p.Since
		} else {
			if at.IsZero() {
				at = h.momentOf(version)
			}
			w.Since = at
		}
		nodes[n] = w
	}
}

// momentOf is when the event at seq happened, as its envelope says (a
// restored stream's messages are stored at the restore, their events
// happened before); the controller's clock when the log cannot say.
func (h *Composer) momentOf(seq uint64) time.Time {
	if seq == 0 || h.Store == nil {
		return h.Now()
	}
	ctx, cancel := context.WithTimeout(context.Background(), momentWait)
	defer cancel()
	m, err := h.Store.Get(ctx, seq)
	if err != nil {
		return h.Now()
	}
	env, err := events.DecodeEnvelope(m.Data)
	if err != nil {
		return h.Now()
	}
	return env.OccurredAt
}

func (c *composedCache) get(version, forgets uint64) (*Composed, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodes, c.valid && c.version == version && c.forgets == forgets
}

// lastAt is the newest version cached and its nodes, whichever it is.
func (c *composedCache) lastAt() cachedAt {
	c.mu.Lock()
	defer c.mu.Unlock()
	return cachedAt{version: c.version, nodes: c.nodes}
}

// cachedAt is what the cache held: the nodes of a version and the input
// they were composed from.
type cachedAt struct {
	version uint64
	nodes   *Composed
	in      compose.Input
	order   order
}

// before is the cache's nodes and input when they are of a version older
// than at's and the same forgets: what at's nodes can be told apart from.
func (c *composedCache) before(at At) (cachedAt, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return cachedAt{version: c.version, nodes: c.nodes, in: c.in, order: c.order}, c.valid && c.version < at.Version && c.forgets == at.Forgets
}

// put keeps nodes as at's, unless the cache holds a newer version: a
// caller that read the read models before an assignment must not put back
// what the assignment moved.
func (c *composedCache) put(at At, nodes *Composed, o order) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.valid && c.version > at.Version {
		return
	}
	c.version, c.forgets, c.valid, c.nodes, c.in, c.memo, c.order = at.Version, at.Forgets, true, nodes, at.Input, nil, o
}

// holds says whether the cache holds nodes; the caller holds mu.
func (c *composedCache) holds(nodes *Composed) bool {
	return c.valid && c.nodes == nodes
}

// orderOf is the order kept for nodes: nil when the cache no longer holds
// them (an order is kept only for what it holds) or keeps none.
func (c *composedCache) orderOf(nodes *Composed) order {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.holds(nodes) {
		return nil
	}
	return c.order
}

// Memo is what fn makes of nodes, made once while the cache holds nodes
// (what ComposeAll answered): status's choices among providers walked
// every would-send twice a status, 15 ms at 100,000 nodes (issue 34). fn
// must read nothing but nodes. Nodes the cache no longer holds are made
// each time.
func (h *Composer) Memo(nodes *Composed, fn func() any) any {
	c := &h.composed
	c.mu.Lock()
	held := c.holds(nodes)
	memo := c.memo
	c.mu.Unlock()
	if held && memo != nil {
		return memo
	}
	memo = fn()
	if held {
		c.mu.Lock()
		if c.holds(nodes) {
			c.memo = memo
		}
		c.mu.Unlock()
	}
	return memo
}

// EachAssignedAt calls fn with each assignment of an active node that
// composition's input at version was read with, in the rows' order, when
// the cache holds that version (ok false, fn never called, when not):
// status's held reads them rather than every assignment row again, 0.11
// CPU s a status after a composition change at 100,000 nodes (issue 34).
// They are the rows a view at version holds, since the only events that
// write assignment rows (ModuleAssigned, ModuleUnassigned) move the
// version.
func (h *Composer) EachAssignedAt(version uint64, fn func(node, module, build string) error) (ok bool, err error) {
	c := &h.composed
	c.mu.Lock()
	assigned, ok := c.in.Assignments, c.valid && c.version == version
	c.mu.Unlock()
	if !ok {
		return false, nil
	}
	for _, a := range assigned {
		if err := fn(a.Node, a.Module, a.Build); err != nil {
			return true, err
		}
	}
	return true, nil
}

// Holds says whether the cache holds every would-send at at: a push that
// finds it so has nothing to keep.
func (h *Composer) Holds(at At) bool {
	_, ok := h.composed.get(at.Version, at.Forgets)
	return ok
}

// Cached is the composition version whose every would-send the cache
// holds (false: none): what a push over every node leaves for status.
func (h *Composer) Cached() (uint64, bool) {
	h.composed.mu.Lock()
	defer h.composed.mu.Unlock()
	return h.composed.version, h.composed.valid
}
