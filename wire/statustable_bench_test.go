package wire

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"
)

// BenchmarkStatusTable is a brief status table of a fleet pushed together
// (MESH_BENCH_NODES, 100,000 by default) written and read back as it
// crosses the bus, against the same columns as a JSON value a row each
// (the form before statusTableJSON) in the same run. Command:
// go test ./wire -run '^$' -bench StatusTable -benchmem
func BenchmarkStatusTable(b *testing.B) {
	var table StatusTable
	at := time.Now()
	nodes, err := strconv.Atoi(os.Getenv("MESH_BENCH_NODES"))
	if err != nil || nodes < 1 {
		nodes = 100_000 // as coretest.Nodes, which imports this package
	}
	for i := range nodes {
		table.Add(NodeStatus{Name: fmt.Sprintf("fleet-%05d", i), State: StateCurrent, Sequence: 2, Since: at})
	}
	type columns struct {
		States   []State  `json:"states"`
		Name     []string `json:"name"`
		State    []uint8  `json:"state"`
		Sequence []uint64 `json:"sequence"`
		Since    []int64  `json:"since"`
		Detail   []string `json:"detail"`
	}
	for _, c := range []struct {
		name string
		out  any
		back func() any
	}{
		{"runs", &table, func() any { return &StatusTable{} }},
		{"a-value-a-row", (*columns)(&table), func() any { return &columns{} }},
	} {
		b.Run(c.name, func(b *testing.B) {
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
