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

// Would is what composition says of one node now.
type Would struct {
	// verdict.Would is what the verdict reads: composable, the content
	// digest, or why not.
	verdict.Would
	LeftOut    []compose.LeftOut
	Unresolved []compose.Unresolved
	Receives   []compose.Receipt
	Chosen     []compose.Chosen // each of Receives, with why
}

// composedCache holds every node's would-send content digest for one
// composition version. Reports, sends and standings do not move that
// version, so status on a busy mesh reads digests instead of composing.
// It is also the memory of since when each node could not be composed:
// the next version's nodes carry it on while they stay so.
type composedCache struct {
	mu      sync.Mutex
	version uint64
	// forgets is the secrets' count of dropped salts the nodes were
	// composed at (worldCache.forgets says why it is part of the key).
	forgets uint64
	valid   bool
	nodes   map[string]Would
}

// momentWait bounds reading the moment of a composition version's event:
// a status must not hang on the log for a since.
const momentWait = 2 * time.Second

// ComposeAll answers what every active node would be sent now, from the
// cache when the read models' composition version has not moved.
func (h *Composer) ComposeAll() (map[string]Would, error) {
	for {
		var version uint64
		var in compose.Input
		hit := false
		forgets := h.Secrets.Forgets() // before the input is read: see WorldAt
		err := h.Proj.Read(func(v *projections.View) (err error) {
			version = v.CompositionVersion()
			if _, hit = h.composed.get(version, forgets); hit {
				return nil // no need to read composition's input
			}
			in, err = h.Input(v)
			return err
		})
		if err != nil {
			return nil, err
		}
		if !hit {
			return h.composedAt(version, forgets, compose.NewWorld(in)), nil
		}
		if nodes, ok := h.composed.get(version, forgets); ok {
			return nodes, nil
		}
		// Another caller cached a newer version meanwhile: read again.
	}
}

// ComposedFor answers every node's would-send for a world built at a
// composition version: from the cache if it holds that version, else by
// composing w (which a caller that already indexed a world passes in, so
// it is not built twice) and keeping the result.
func (h *Composer) ComposedFor(version uint64, w *compose.World) map[string]Would {
	return h.composedAt(version, h.Secrets.Forgets(), w)
}

// WouldOf is ComposedFor for the nodes of names alone (every node when
// names is nil): from the cache when it holds the version, else composing
// only those, and caching nothing, since a few nodes are not the mesh.
// A push naming one node composed all 100,000 after each assignment.
func (h *Composer) WouldOf(version uint64, w *compose.World, names map[string]bool) map[string]Would {
	forgets := h.Secrets.Forgets()
	if nodes, ok := h.composed.get(version, forgets); ok {
		return nodes
	}
	if names == nil {
		return h.composedAt(version, forgets, w)
	}
	list := slices.Collect(maps.Keys(names))
	results := make([]Would, len(list))
	fanout.PerCore(len(list), func(i int) { results[i] = wouldOf(w.Compose(list[i])) })
	nodes := make(map[string]Would, len(list))
	for i, n := range list {
		nodes[n] = results[i]
	}
	return nodes
}

// wouldOf is what one composition's result says of its node.
func wouldOf(r compose.Result) Would {
	out := Would{Would: verdict.Would{Composable: r.Composable(), ContentDigest: r.Digest, Reason: r.Reason()},
		LeftOut: r.LeftOut, Unresolved: r.Unresolved}
	if r.Declaration != nil {
		out.Receives, out.Chosen = r.Declaration.Receives, r.Chosen
	}
	return out
}

// composedAt is ComposedFor at the secrets' count of dropped salts the
// world's input was read at.
func (h *Composer) composedAt(version, forgets uint64, w *compose.World) map[string]Would {
	if nodes, ok := h.composed.get(version, forgets); ok {
		return nodes
	}
	names := w.Nodes()
	results := make([]Would, len(names))
	fanout.PerCore(len(names), func(i int) { results[i] = wouldOf(w.Compose(names[i])) })
	nodes := make(map[string]Would, len(names))
	for i, n := range names {
		nodes[n] = results[i]
	}
	h.sinceCannotCompose(version, nodes)
	h.composed.put(version, forgets, nodes)
	return nodes
}

// sinceCannotCompose says since when each node that cannot be composed at
// version could not be: since the last composition said so, if it did and
// is not newer, else since the event that moved composition to version.
// Not the node's enrolment (issue 31): a node enrolled a year ago whose
// provider was unassigned an hour ago cannot be composed since an hour
// ago. A version nobody composed (no status or push between two changes)
// is not seen, so the moment is the first change after which it was
// found so; after a start, the newest change at the latest.
func (h *Composer) sinceCannotCompose(version uint64, nodes map[string]Would) {
	prevVersion, prev := h.composed.last()
	var at time.Time
	for n, w := range nodes {
		if w.Composable {
			continue
		}
		if p, ok := prev[n]; ok && !p.Composable && !p.Since.IsZero() && prevVersion <= version {
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

func (c *composedCache) get(version, forgets uint64) (map[string]Would, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodes, c.valid && c.version == version && c.forgets == forgets
}

// last is the newest version cached and its nodes, whichever it is.
func (c *composedCache) last() (uint64, map[string]Would) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.version, c.nodes
}

func (c *composedCache) put(version, forgets uint64, nodes map[string]Would) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.version, c.forgets, c.valid, c.nodes = version, forgets, true, nodes
}
