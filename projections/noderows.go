package projections

import (
	"bytes"
	"fmt"
	"github.com/meshctl/mesh/fanout"
	"slices"
	"sync"

	"github.com/cockroachdb/pebble/v2"
	"github.com/meshctl/mesh/projections/moved"
	"github.com/meshctl/mesh/projections/rows"
)

// The live fold's memory of node rows, shared with readers. The folder
// remembers every node row it reads or writes, encoded as Pebble holds it
// (folder.rows); once that memory holds every row, a view reads the node
// rows from it rather than from Pebble. The first status after a push to
// 100,000 nodes spent three fifths of its CPU reading those rows back
// from Pebble (decompressing the blocks the push's flush had just
// written, which the block cache did not hold), though the fold had
// every one of them in memory (issue 34's 300 ms bound). The memory is
// the fold's own map, not a copy: a second copy of every row would cost
// what issue 34's 700 MiB bound cannot spare.
//
// A view must never mix two moments: rows of one commit with Pebble's
// other read models of another. Every change the live fold makes to the
// map is made under mu, together with at, the checkpoint the map is
// then of; a commit marks the memory committing (under mu) before its
// Pebble commit and sets at after it (and the fill at the fold's start
// sets at to the checkpoint the read models are at, before it is
// complete). A view notes at, under mu, as it
// takes its Pebble snapshot, and reads the map only while it is still of
// that checkpoint, no commit is in flight and it was not forgotten since
// (epoch): otherwise it reads Pebble, as every view did before.
// TestNodesFromMemoryAgreeWithPebble holds the two to each other.
type nodeMemory struct {
	mu   sync.RWMutex
	rows map[string][]byte // the folder's rows: the same map
	// complete: rows holds every node row Pebble holds. Only the fold's
	// goroutine sets it (fill), and only while it is set do readers read
	// rows, so the fold may write rows unlocked while it is not set
	// (warm.go does, before the first commit).
	complete   bool
	committing bool
	at         uint64
	// epoch moves each time the memory stops being complete.
	epoch uint64
	// tried: a fill was tried since the memory was last forgotten (a
	// fleet larger than rememberRows is not tried again at every commit).
	tried bool
	// moved is what moved composition since the live fold began, by
	// node (nil until it shares this memory).
	moved *moved.Log
	// order is rows' names, sorted (key order), for the epoch and the
	// count it was made at: names are only ever added between two
	// forgettings (a node row is never deleted), so the same count in the
	// same epoch is the same names. Kept under orderMu, which readers
	// holding mu for reading take.
	orderMu    sync.Mutex
	order      []string
	orderEpoch uint64
	// held is rows' values in order's order: made with order, and kept by
	// each commit's rows (put), so that a view copies them in order rather
	// than looks up every name, a tenth of the controller's CPU for a
	// status of 100,000 nodes.
	held [][]byte
}

// forget marks the memory incomplete; the caller holds mu for writing.
// The order and the rows kept in it go with it: a memory cleared for a
// fleet past rememberRows is never complete again, and they would hold
// its rows for good.
func (m *nodeMemory) forget() {
	m.complete, m.tried = false, false // a discarded batch's fold fills again
	m.epoch++
	m.orderMu.Lock()
	m.order, m.held = nil, nil
	m.orderMu.Unlock()
}

// fill makes the live folder's memory hold every node row, at its start
// or once it has committed: the rows it lacks are read from Pebble, which
// the fold alone writes, so what it read is what it committed, and what
// the memory already holds is the same. A fleet larger than rememberRows is not
// remembered whole (the fold's memory would clear it anyway): views read
// Pebble then.
func (f *folder) fill() error {
	m := f.mem
	if m.complete || m.tried {
		return nil
	}
	m.tried = true
	lo, hi := prefixBounds(prefixNode)
	it, err := f.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return err
	}
	defer it.Close()
	type row struct {
		name string
		row  []byte
	}
	var lacking []row
	count := 0
	for it.First(); it.Valid(); it.Next() {
		if count++; count > rememberRows {
			return nil
		}
		name := it.Key()[1:]
		if _, ok := f.rows[string(name)]; !ok {
			lacking = append(lacking, row{string(name), bytes.Clone(it.Value())})
		}
	}
	if err := it.Error(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, r := range lacking {
		f.rows[r.name] = r.row
	}
	m.complete = true
	return nil
}

// fillAtStart makes the live folder's memory hold every node row before
// it folds anything, of the checkpoint the read models are at: a memory
// filled only at a commit was never filled in a controller started on a
// mesh with nothing new to fold (a quiet one, or one whose fleet was lost
// and says nothing), and each of its statuses read and decoded every node
// row from Pebble, 0.4 s of CPU at 100,000 nodes against some 0.1 from
// the memory. Only the fold's goroutine writes Pebble, and it has not
// begun, so what is read is what that checkpoint holds. whole: warm read
// every row already (a start from a snapshot), and they are not read twice.
func (f *folder) fillAtStart(whole bool) {
	f.lock()
	f.mem.at = readCheckpoint(f.db)
	if whole {
		f.mem.complete, f.mem.tried = true, true
	}
	f.unlock()
	if whole {
		return
	}
	if err := f.fill(); err != nil {
		// Only views reading Pebble, as before: the first commit tries again.
		f.mem.tried = false
	}
}

// share makes f's memory of node rows the one views of e read: f is the
// live folder, and e.db the Pebble it writes.
func (e *Engine) share(f *folder) {
	f.shared = true
	// The moves it folds from here on and, before, none since the last
	// that moved composition (moved.New): a world composed of this
	// generation (the fold started again on it after a bus restart,
	// Refollow; or at the first start, and composed since) is patched by
	// the next change. After a rebuild nothing before the new fold is
	// known: a rebuild repairs, and a world composed from the rows it
	// replaced is read again whole at the next change (Changed against a
	// full read), not patched only where the change touched.
	checkpoint := readCheckpoint(e.db)
	known := readU64(e.db, keyComposition)
	if e.sharedGen != "" && e.sharedGen != e.gen {
		known = checkpoint + 1
	}
	e.sharedGen = e.gen
	f.mem.moved = moved.New(known, checkpoint)
	e.memory.Store(f.mem)
}

// MovedBetween names the nodes the events that moved composition after
// version from, up to version to, touched (moved.Log.Between): false when
// the live fold cannot say, and the caller reads everything.
func (v *View) MovedBetween(from, to uint64) (map[string]bool, bool) {
	if v.mem == nil {
		return nil, false
	}
	v.mem.mu.RLock()
	defer v.mem.mu.RUnlock()
	if v.mem.moved == nil {
		return nil, false
	}
	return v.mem.moved.Between(from, to)
}

// memoryAt is what a view notes of the shared memory as it takes its
// Pebble snapshot: call it with m.mu held for reading.
func (m *nodeMemory) memoryAt() (at, epoch uint64, ok bool) {
	return m.at, m.epoch, m.complete && !m.committing
}

// nodesFromMemory decodes every node row (brief as rows.DecodeNodeAs) from
// the shared memory, in key order, when it is still of the view's moment
// (ok false, and nothing read, when not). A remembered row is never
// changed in place (a commit replaces it), so it is read unlocked.
func (v *View) nodesFromMemory(brief bool) (out []Node, ok bool, err error) {
	names, held, ok := v.heldRows()
	if !ok {
		return nil, false, nil
	}
	out, errs := make([]Node, len(held)), make([]error, len(held))
	fanout.PerCore(len(held), func(i int) { out[i], errs[i] = rows.DecodeNodeAs(held[i], brief) })
	for i, err := range errs {
		if err != nil {
			return nil, false, fmt.Errorf("projections: row %q is corrupt: %w", nodeKey(names[i]), err)
		}
	}
	return out, true, nil
}

// heldRows are the memory's names in key order and their rows, when it is
// still of the view's moment.
func (v *View) heldRows() (names []string, held [][]byte, ok bool) {
	if m := v.mem; m != nil && v.memOK {
		m.mu.RLock()
		defer m.mu.RUnlock()
		if at, epoch, complete := m.memoryAt(); complete && at == v.memAt && epoch == v.memEpoch {
			names, held = m.inOrder()
			return names, held, true
		}
	}
	return nil, nil, false
}

// EachNode hands every node row, brief as NodesBrief, to fn in key order,
// decoded a run at a time (rows.EachRun, keep as there). Without keep,
// only a node's Name (the memory's own) outlives fn.
func (v *View) EachNode(keep bool, fn func(Node) error) error {
	names, held, ok := v.heldRows()
	if !ok {
		nodes, err := nodeRows(v.r, true)
		for i := 0; err == nil && i < len(nodes); i++ {
			err = fn(nodes[i])
		}
		return err
	}
	return rows.EachRun(held, true, keep, func(i int, n Node, err error) error {
		if err != nil {
			return fmt.Errorf("projections: row %q is corrupt: %w", nodeKey(names[i]), err)
		}
		n.Name = names[i]
		return fn(n)
	})
}

// inOrder is the memory's names in key order and a copy of their rows
// (the memory's own slice is written by the next commit); the caller
// holds mu for reading.
func (m *nodeMemory) inOrder() ([]string, [][]byte) {
	m.orderMu.Lock()
	defer m.orderMu.Unlock()
	if m.orderEpoch != m.epoch || len(m.order) != len(m.rows) || m.order == nil {
		order := make([]string, 0, len(m.rows))
		for n := range m.rows {
			order = append(order, n)
		}
		slices.Sort(order)
		m.order, m.orderEpoch = order, m.epoch
		m.held = make([][]byte, len(order))
		for i, n := range order {
			m.held[i] = m.rows[n]
		}
	}
	return m.order, slices.Clone(m.held)
}

// put is a commit's row of name, kept in held where order has its place,
// found in the sorted names (a name it lacks makes the next view sort
// them again); the caller holds mu for writing, as it writes the row into
// rows.
func (m *nodeMemory) put(name string, row []byte) {
	m.orderMu.Lock()
	defer m.orderMu.Unlock()
	if i, ok := slices.BinarySearch(m.order, name); ok && m.orderEpoch == m.epoch {
		m.held[i] = row
	}
}
