package world

import (
	"iter"
	"maps"
)

// Composed is every node's would-send at one composition version, as
// ComposeAll answers it: read-only once answered, so any number of readers
// may hold it while a newer version is composed.
//
// A version composed from an older one by its change (composedAt's patch)
// holds only the nodes the change moved, over the older version's map,
// which the two share. Copying that map whole was the largest allocation
// of the first status after a label change at 100,000 nodes (19 of its
// 40 MB, issue 34), and a status that allocates is one the collector may
// run during: those were the ones over 300 ms. The moved nodes of a chain
// of changes are carried from one version to the next until they are an
// eighth of the map, and the map is then copied once with them in.
type Composed struct {
	base map[string]Would // shared with the versions before; never written
	over map[string]Would // the nodes this version composed again; nil when whole
	gone map[string]bool  // nodes of base this version no longer has
	n    int
}

// composedOf is a version's would-sends, every one in m (which the caller
// hands over and does not write again).
func composedOf(m map[string]Would) *Composed {
	return &Composed{base: m, n: len(m)}
}

// Lookup is name's would-send, and whether the version holds name.
func (c *Composed) Lookup(name string) (Would, bool) {
	if c == nil {
		return Would{}, false
	}
	if w, ok := c.over[name]; ok {
		return w, true
	}
	if c.gone[name] {
		return Would{}, false
	}
	w, ok := c.base[name]
	return w, ok
}

// Of is name's would-send: the zero Would, which says nothing composable,
// for a node the version does not hold.
func (c *Composed) Of(name string) Would {
	w, _ := c.Lookup(name)
	return w
}

// Len is how many nodes the version holds.
func (c *Composed) Len() int {
	if c == nil {
		return 0
	}
	return c.n
}

// All yields each node and its would-send once, in no order.
func (c *Composed) All() iter.Seq2[string, Would] {
	return func(yield func(string, Would) bool) {
		if c == nil {
			return
		}
		for n, w := range c.over {
			if !yield(n, w) {
				return
			}
		}
		for n, w := range c.base {
			if _, moved := c.over[n]; moved || c.gone[n] {
				continue
			}
			if !yield(n, w) {
				return
			}
		}
	}
}

// Choosing yields, once each and in no order, the nodes whose would-send
// receives a provider (Would.Chosen): status's choices are among those
// alone. A node of base with none is passed over before the version's
// maps are asked about it: over 100,000 nodes that receive nothing, the
// two lookups a node of All were 27 ms of the 184 of the first status
// after a push (a profile, issue 34), for an answer of nothing.
func (c *Composed) Choosing() iter.Seq2[string, Would] {
	return func(yield func(string, Would) bool) {
		if c == nil {
			return
		}
		for n, w := range c.over {
			if len(w.Chosen) > 0 && !yield(n, w) {
				return
			}
		}
		for n, w := range c.base {
			if len(w.Chosen) == 0 {
				continue
			}
			if _, moved := c.over[n]; moved || c.gone[n] {
				continue
			}
			if !yield(n, w) {
				return
			}
		}
	}
}

// patched is c's would-sends with the nodes of changed taken out and those
// of over (composed again, each among changed) put in. It shares c's base;
// over becomes the new version's, which the caller does not write again.
func (c *Composed) patched(changed map[string]bool, over map[string]Would) *Composed {
	base, carried, gone := c.base, c.over, c.gone
	if len(carried)+len(gone) > len(base)/8 {
		base, carried, gone = c.flat(), nil, nil
	}
	next := &Composed{base: base, over: over}
	for n, w := range carried {
		if !changed[n] {
			over[n] = w
		}
	}
	// What base holds that this version does not: what was gone and did
	// not come back, and what changed and was not composed again (retired).
	for n := range gone {
		if _, back := over[n]; !back {
			next.gone = mark(next.gone, n)
		}
	}
	for n := range changed {
		if _, inBase := base[n]; inBase {
			if _, back := over[n]; !back {
				next.gone = mark(next.gone, n)
			}
		}
	}
	next.n = len(base) - len(next.gone)
	for n := range over {
		if _, inBase := base[n]; !inBase {
			next.n++
		}
	}
	return next
}

// mark adds n to set, making it when nil.
func mark(set map[string]bool, n string) map[string]bool {
	if set == nil {
		set = make(map[string]bool)
	}
	set[n] = true
	return set
}

// flat is c's would-sends in one map of their own.
func (c *Composed) flat() map[string]Would {
	if len(c.over) == 0 && len(c.gone) == 0 {
		return c.base
	}
	m := maps.Clone(c.base)
	for n := range c.gone {
		delete(m, n)
	}
	maps.Copy(m, c.over)
	return m
}
