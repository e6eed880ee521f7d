package status

import (
	"context"

	"github.com/meshctl/mesh/commands/core"
	"github.com/meshctl/mesh/commands/world"
	"github.com/meshctl/mesh/events/store"
)

// logReader is the composer's way to the log (world.LogReader): it may
// not read it itself, and status, whose first answer after a composition
// change it serves, may. With it the composer patches the world it keeps
// for the nodes a change touched rather than read and index 100,000
// nodes again (issue 34); without it every status after a change would
// cost that again.
func logReader(c *core.Core) world.LogReader {
	return func(ctx context.Context, from uint64, subjects []string, fn func(uint64, string) error) error {
		return c.Store.Read(ctx, store.ReadOptions{From: from, Follow: true, Filters: subjects}, func(m store.Msg) error { return fn(m.Seq, m.Subject) })
	}
}
