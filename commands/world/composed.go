package world

import (
	"sync"

	"github.com/meshctl/mesh/compose"
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
type composedCache struct {
	mu      sync.Mutex
	version uint64
	valid   bool
	nodes   map[string]Would
}

// ComposeAll answers what every active node would be sent now, from the
// cache when the read models' composition version has not moved.
func (h *Composer) ComposeAll() (map[string]Would, error) {
	for {
		var version uint64
		var in compose.Input
		hit := false
		err := h.Proj.Read(func(v *projections.View) (err error) {
			version = v.CompositionVersion()
			if _, hit = h.composed.get(version); hit {
				return nil // no need to read composition's input
			}
			in, err = h.Input(v)
			return err
		})
		if err != nil {
			return nil, err
		}
		if !hit {
			return h.ComposedFor(version, compose.NewWorld(in)), nil
		}
		if nodes, ok := h.composed.get(version); ok {
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
	if nodes, ok := h.composed.get(version); ok {
		return nodes
	}
	names := w.Nodes()
	results := make([]Would, len(names))
	fanout.PerCore(len(names), func(i int) {
		r := w.Compose(names[i])
		results[i] = Would{Would: verdict.Would{Composable: r.Composable(), ContentDigest: r.Digest, Reason: r.Reason()},
			LeftOut: r.LeftOut, Unresolved: r.Unresolved}
		if r.Declaration != nil {
			results[i].Receives, results[i].Chosen = r.Declaration.Receives, r.Chosen
		}
	})
	nodes := make(map[string]Would, len(names))
	for i, n := range names {
		nodes[n] = results[i]
	}
	h.composed.put(version, nodes)
	return nodes
}

func (c *composedCache) get(version uint64) (map[string]Would, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodes, c.valid && c.version == version
}

func (c *composedCache) put(version uint64, nodes map[string]Would) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.version, c.valid, c.nodes = version, true, nodes
}
