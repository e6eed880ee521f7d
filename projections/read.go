package projections

import (
	"github.com/cockroachdb/pebble/v2"
)

// View reads the read models as of one instant (a Pebble snapshot): a
// composition reads nodes, assignments and manifests that belong together
// even while the fold commits.
type View struct {
	r pebble.Reader
	// mem is the live fold's memory of node rows, of checkpoint memAt
	// and epoch memEpoch when the snapshot was taken (memOK: complete,
	// and no commit in flight then): see noderows.go.
	mem             *nodeMemory
	memAt, memEpoch uint64
	memOK           bool
}

// Read runs fn against a consistent view of every read model.
func (e *Engine) Read(fn func(*View) error) error {
	return e.view(func(db pebble.Reader) error {
		v := &View{}
		// The snapshot is taken with the memory's lock held for reading:
		// no commit changes Pebble or the memory between the two.
		if m := e.memory.Load(); m != nil {
			m.mu.RLock()
			v.r = db.(*pebble.DB).NewSnapshot()
			v.mem = m
			v.memAt, v.memEpoch, v.memOK = m.memoryAt()
			m.mu.RUnlock()
		} else {
			v.r = db.(*pebble.DB).NewSnapshot()
		}
		defer v.r.(*pebble.Snapshot).Close()
		return fn(v)
	})
}

// Checkpoint is the last event this view reflects.
func (v *View) Checkpoint() uint64 { return readCheckpoint(v.r) }

// CompositionVersion is the sequence of the last event folded that can
// change any node's composition (0: none yet).
func (v *View) CompositionVersion() uint64 {
	b, closer, err := v.r.Get(keyComposition)
	if err != nil {
		return 0
	}
	defer closer.Close()
	return getU64(b)
}

// Nodes lists every node ever enrolled, retired ones included, by name.
func (v *View) Nodes() ([]Node, error) { return v.nodes(false) }

// NodesBrief lists every node as Nodes does, without capabilities and
// labels: for a push's targets and liveness, which read every row and
// neither of those (status reads them through EachNode).
func (v *View) NodesBrief() ([]Node, error) { return v.nodes(true) }

// nodes reads every node row from the live fold's memory when it is of
// this view's moment, else from Pebble (noderows.go).
func (v *View) nodes(brief bool) ([]Node, error) {
	if out, ok, err := v.nodesFromMemory(brief); ok || err != nil {
		return out, err
	}
	return nodeRows(v.r, brief)
}

// HandHeld lists, by name, the nodes whose last declaration was written by
// hand (mesh declare), retired ones too: what their rows' LastSent say,
// without reading every row.
func (v *View) HandHeld() ([]string, error) {
	return scanRows(v.r, []byte{prefixHandHeld}, func(k, _ []byte) (string, error) { return string(k[1:]), nil })
}

// Node reads one node's row.
func (v *View) Node(name string) (Node, bool, error) {
	return getNode(v.r, name)
}

// Modules lists the catalogue by module name.
func (v *View) Modules() ([]ModuleRow, error) { return decodeRows[ModuleRow](v.r, prefixModule) }

// Module reads one module's catalogue row.
func (v *View) Module(name string) (ModuleRow, bool, error) {
	return getOne[ModuleRow](v.r, moduleKey(name))
}

// Manifest reads the canonical bytes a build was registered with.
func (v *View) Manifest(module, build string) ([]byte, bool, error) {
	return getRaw(v.r, pairKey(prefixBuild, module, build))
}

// Assignments lists every assignment, by node then module.
func (v *View) Assignments() ([]AssignmentRow, error) {
	return assignmentRows(v.r, []byte{prefixAssign})
}

// AssignmentsOf lists one node's assignments, by module.
func (v *View) AssignmentsOf(node string) ([]AssignmentRow, error) {
	return assignmentRows(v.r, pairPrefix(prefixAssign, node))
}

// AssignedTo lists the nodes a module is assigned to, by name.
func (v *View) AssignedTo(module string) ([]string, error) {
	return keysUnder(v.r, pairPrefix(prefixAssignByModule, module))
}

// Nodes lists every node (see View.Nodes).
func (e *Engine) Nodes() (out []Node, err error) {
	err = e.Read(func(v *View) error { out, err = v.Nodes(); return err })
	return out, err
}

// Node reads one node's row (see View.Node).
func (e *Engine) Node(name string) (n Node, found bool, err error) {
	err = e.Read(func(v *View) error { n, found, err = v.Node(name); return err })
	return n, found, err
}

// RawScan runs fn over an iterator of the node rows: for benchmarks that
// measure a read model against the bare cost of reading its rows.
func (e *Engine) RawScan(fn func(*pebble.Iterator)) error {
	return e.Read(func(v *View) error {
		lo, hi := prefixBounds(prefixNode)
		it, err := v.r.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
		if err != nil {
			return err
		}
		defer it.Close()
		fn(it)
		return it.Error()
	})
}
