package text

import (
	"encoding/json"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/meshctl/mesh/commands/core/coretest"
	"github.com/meshctl/mesh/wire"
)

// BenchmarkStatusShown is what mesh status does with a brief answer of
// MESH_BENCH_NODES nodes (100,000 by default) once it has its bytes: read
// them back, make every string showable, print the table. The ratio to
// read alone is the one to read: read-only is the same bytes decoded in
// the same run. Command:
// go test ./cmd/mesh/text -run '^$' -bench StatusShown -benchmem
func BenchmarkStatusShown(b *testing.B) {
	nodes := coretest.Nodes(100_000)
	at := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	table := &wire.StatusTable{States: []wire.State{}}
	for i := range nodes {
		n := wire.NodeStatus{Name: fmt.Sprintf("fleet-%05d", i), State: wire.StateCurrent, Sequence: 2, Since: at}
		if i%100 == 0 {
			n.State, n.Detail = wire.StateFailed, "/etc/motd: permission denied"
		}
		table.Add(n)
	}
	data, err := json.Marshal(wire.StatusReport{Table: table})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("read-only", func(b *testing.B) {
		for b.Loop() {
			var s wire.StatusReport
			if err := json.Unmarshal(data, &s); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("read-shown-printed", func(b *testing.B) {
		for b.Loop() {
			var s wire.StatusReport
			if err := json.Unmarshal(data, &s); err != nil {
				b.Fatal(err)
			}
			Showable(&s)
			Status(io.Discard, s)
		}
	})
}
