package published

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/meshctl/mesh/projections/disk"
)

// Compacting level 0 before a publish never holds the publish for ever:
// when Pebble compacts nothing though level 0 is not empty, the wait ends
// and the snapshot goes as it is; and the engine closing ends it at once,
// saying so.
func TestDrainingLevelZeroEndsWhenNothingCompactsIt(t *testing.T) {
	t.Parallel()
	// Pebble's own threshold: one table in level 0 is not compacted.
	db, err := pebble.Open(t.TempDir(), &pebble.Options{FS: vfs.Default, Logger: disk.Logger{Log: slog.New(slog.DiscardHandler)}})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Set([]byte("k"), []byte("v"), pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	never := make(chan struct{})
	if err := drainLevelZero(context.Background(), db, never); err != nil {
		t.Fatalf("with nothing compacting level 0, the wait ended with %v, not as it was", err)
	}
	if n := db.Metrics().Levels[0].TablesCount; n != 1 {
		t.Fatalf("level 0 holds %d tables, not the one flushed", n)
	}
	closing, cancel := context.WithCancel(context.Background())
	cancel()
	if err := drainLevelZero(closing, db, never); err == nil || !strings.Contains(err.Error(), "not compacted") {
		t.Fatalf("with the engine closing, the wait ended with %v, not saying level 0 was not compacted", err)
	}
}
