package projections

// A controller that starts from a snapshot on the bus folds the stream's
// tail with an empty memory of node rows and report keys (the folder's,
// fold.go), so a tail of a push to every node read each node's row and key
// from Pebble once, a lookup each: 15% of a start's samples at 100,000
// nodes (docs/performance.md, "A start from a snapshot on the bus"). One
// scan of each in key order fills that memory first: a start whose tail
// touches most nodes pays a sequential read instead of a hundred thousand
// point lookups.

// warm fills f's memory of node rows and report keys from its read models,
// when they fit in it, and answers whether it holds every node row;
// otherwise it leaves the memory as it was.
func (f *folder) warm() (bool, error) {
	// The rows are remembered as they are encoded: a row is decoded when
	// the tail touches it (fold.go).
	type row struct {
		node string
		row  []byte
	}
	nodes, err := scanRows(f.db, []byte{prefixNode}, func(k, v []byte) (row, error) {
		// A copy of its own: the scan's bytes are one arena (scan.Rows), which
		// one kept row would hold whole until the fold replaced every row.
		return row{string(k[1:]), append([]byte(nil), v...)}, nil
	})
	if err != nil || len(nodes) > rememberRows {
		return false, err
	}
	type named struct{ node, key string }
	keys, err := scanRows(f.db, []byte{prefixReportKey}, func(k, v []byte) (named, error) { return named{string(k[1:]), string(v)}, nil })
	if err != nil || len(keys) > rememberRows {
		return false, err
	}
	for _, n := range nodes {
		f.rows[n.node] = n.row
	}
	for _, k := range keys {
		f.reportKeys[k.node] = k.key
	}
	return true, nil
}
