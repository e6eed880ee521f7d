package projections

import "github.com/cockroachdb/pebble/v2"

// Nodes lists every node ever enrolled, retired ones included, by name.
func (e *Engine) Nodes() ([]Node, error) {
	var out []Node
	err := e.view(func(r pebble.Reader) (err error) {
		out, err = decodeRows[Node](r, prefixNode)
		return err
	})
	return out, err
}

// Node reads one node's row.
func (e *Engine) Node(name string) (Node, bool, error) {
	var n Node
	var found bool
	err := e.view(func(r pebble.Reader) (err error) {
		found, err = getJSON(r, nodeKey(name), &n)
		return err
	})
	return n, found, err
}

// Snapshot is every read model at once, for comparing two folds of one stream.
type Snapshot struct {
	Checkpoint uint64
	Nodes      []Node
}

// Snapshot reads every read model under one lock.
func (e *Engine) Snapshot() (Snapshot, error) {
	var s Snapshot
	err := e.view(func(db pebble.Reader) (err error) {
		// A Pebble snapshot, so rows and checkpoint are of one instant even
		// while the follower commits.
		r := db.(*pebble.DB).NewSnapshot()
		defer r.Close()
		s.Checkpoint = readCheckpoint(r)
		s.Nodes, err = decodeRows[Node](r, prefixNode)
		return err
	})
	return s, err
}
