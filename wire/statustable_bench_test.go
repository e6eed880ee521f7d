package wire

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"
)

// BenchmarkStatusTable is a brief status table of a fleet
// (MESH_BENCH_NODES, 100,000 by default) written and read back as it
// crosses the bus, against the same columns as a JSON value a row each
// (the form before statusTableJSON) in the same run: its nodes current
// since one second (reports that came back together), and since seconds
// spread over ten minutes (each node reported on its own). Command:
// go test ./wire -run '^$' -bench StatusTable -benchmem
func BenchmarkStatusTable(b *testing.B) {
	nodes, err := strconv.Atoi(os.Getenv("MESH_BENCH_NODES"))
	if err != nil || nodes < 1 {
		nodes = 100_000 // as coretest.Nodes, which imports this package
	}
	type columns struct {
		States      []State  `json:"states"`
		Name        []string `json:"name"`
		State       []uint8  `json:"state"`
		Sequence    []uint64 `json:"sequence"`
		Since       []int64  `json:"since"`
		Detail      []string `json:"detail"`
		DetailsOnce bool     `json:"-"` // as StatusTable.DetailsOnce, which it is converted from
	}
	at := time.Now()
	for _, spread := range []int{1, 600} {
		var table StatusTable
		for i := range nodes {
			// A step prime to the spread: every second of it is used.
			since := at.Add(time.Duration(i*7919%spread) * time.Second)
			table.Add(NodeStatus{Name: fmt.Sprintf("fleet-%05d", i), State: StateCurrent, Sequence: 2, Since: since})
		}
		for _, c := range []struct {
			name string
			out  any
			back func() any
		}{
			{"runs", &table, func() any { return &StatusTable{} }},
			{"a-value-a-row", (*columns)(&table), func() any { return &columns{} }},
		} {
			b.Run(fmt.Sprintf("since-over-%ds/%s", spread, c.name), func(b *testing.B) {
				var size int
				for b.Loop() {
					data, err := json.Marshal(c.out)
					if err != nil {
						b.Fatal(err)
					}
					if err := json.Unmarshal(data, c.back()); err != nil {
						b.Fatal(err)
					}
					size = len(data)
				}
				b.ReportMetric(float64(size), "bytes")
			})
		}
	}
}
