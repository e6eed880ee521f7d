package status

import "github.com/meshctl/mesh/wire"

// What status answers: the report, each node's line, and the brief table
// the command line asks for.

// newStatusTable is an empty table with room for n rows.
func newStatusTable(n int) *wire.StatusTable {
	return &wire.StatusTable{States: []wire.State{}, Name: make([]string, 0, n), State: make([]uint8, 0, n),
		Sequence: make([]uint64, 0, n), Since: make([]int64, 0, n), Detail: make([]string, 0, n)}
}
