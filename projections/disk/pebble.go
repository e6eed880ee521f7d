package disk

import (
	"fmt"
	"log/slog"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// How Pebble holds the read models: the settings chosen by measurement at
// a million events and at 100,000 nodes (each figure beside its setting).

// Options are Pebble's settings for a generation of read models in fs: to
// serve (with a WAL), or being rebuilt (without one: until CURRENT names
// the generation a crash abandons it whole, so logging its writes would
// only write them twice). brief is a brief engine's (a time-travel copy):
// Pebble's default memtable. cache is the block cache it shares with every
// other Pebble of the same read models (NewCache); nil, one of its own.
func Options(fs vfs.FS, log *slog.Logger, rebuilding, brief bool, cache *pebble.Cache) *pebble.Options {
	o := &pebble.Options{FS: fs, Logger: Logger{Log: log}, DisableWAL: rebuilding,
		MemTableSize: rebuildMemTable, L0CompactionThreshold: l0Compaction, L0StopWritesThreshold: 4 * l0Compaction,
		Cache: cache, CacheSize: blockCache}
	// A bloom filter in every table (levels below inherit level 0's): a
	// fold looks up node rows and report keys one at a time, and level 0
	// holds up to l0Compaction tables that each span every key, so without
	// one a lookup read an index block of each.
	o.Levels[0].FilterPolicy = bloom.FilterPolicy(10)
	// Every level in Pebble's default, Snappy, not zstd below level 0:
	// zstd made a published snapshot a fifth smaller (the read models of
	// 2.6M events 117 MB against 145 compacted), a second or less of a
	// start's fetch at ten million events, but it made every status read
	// its node rows' blocks dearer: the first status after a push at
	// 100,000 nodes 455-627 CPU ms against 414-487, after a change
	// 1,189-1,223 against 1,053-1,126 (docs/performance.md, "A start from
	// a snapshot on the bus"). An operator asks status far more often
	// than a controller starts from nothing.
	if brief {
		o.MemTableSize = 0 // Pebble's default: 4 MiB
	}
	return o
}

// rebuildMemTable is the largest memtable of read models, live or being
// rebuilt: 16 MiB against Pebble's default 4. Pebble grows memtables from
// 256 KiB towards it, so a small mesh never holds more than its data.
// Measured at a million real events (mesh up with no read models, then
// projections verify and rebuild): with 4 MiB ready in 26.5 s; with 16 MiB
// ready in 18.8 s, rebuild 14.5 s, verify 17.2 s, peak RSS 610 MiB; with
// 64 MiB ready in 18.4-18.9 s, rebuild 15.8 s, verify 14.7 s, but peak RSS
// 900 MiB. (Batches committed whole as Pebble's flushable batches, tried
// too, were faster at 300,000 events and slower at a million.)
const rebuildMemTable = 16 << 20

// l0Compaction is how many files level 0 gathers before Pebble compacts
// it into the level below: 16 against Pebble's 4. A fold writes node rows
// again and again (every send and report rewrites one), spread over the
// whole key space, so every compaction out of level 0 rewrote nearly all of
// the base level: catching up a million real events (10,000 nodes, read
// models of 72 MB) wrote 1.2 GB in compactions, a third of the
// controller's CPU. Gathering 16 files before compacting wrote 0.66-0.73
// GB, and the catch-up took 24-25 CPU seconds instead of 29-31. Reading
// through more files cost nothing measurable: status and node list of
// 10,000 nodes just after the catch-up took 80-100 and 130-170 ms, against
// 100-120 and 200-240 ms with the default.
const l0Compaction = 16

// blockCache is the read models' block cache: 64 MiB against Pebble's
// default 8. At 100,000 nodes a push's fold looks up each node's row and
// report key, and with 8 MiB those lookups read their index, filter and
// data blocks from the file again and again: 3.4 of the controller's 15.5
// CPU seconds over 20 s of the push, 1.1 with 64 MiB. Memory Pebble
// allocates itself as blocks are read, so a small mesh holds far less.
const blockCache = 64 << 20

// NewCache is a block cache of blockCache for every Pebble one set of read
// models opens at once: the live generation, a rebuild's or verify's
// beside it, a time-travel copy (not a publish's copy: projections'
// busModels). Each with one of its own, a rebuild at 10,000 nodes and a
// million events peaked at 382-397 MiB, at issue 34's 400; sharing one,
// 366-373 (docs/performance.md, "Memory"). The caller owns one reference
// (Unref when done); each Pebble opened with it holds its own until it
// closes.
func NewCache() *pebble.Cache { return pebble.NewCache(blockCache) }

// Logger sends Pebble's own messages to the mesh's log at debug level:
// a start that prints "Found 0 WALs" reads as trouble to an operator.
type Logger struct{ Log *slog.Logger }

func (l Logger) Infof(format string, args ...any) {
	l.Log.Debug("pebble: " + fmt.Sprintf(format, args...))
}

func (l Logger) Errorf(format string, args ...any) {
	l.Log.Error("pebble: " + fmt.Sprintf(format, args...))
}

func (l Logger) Fatalf(format string, args ...any) {
	l.Log.Error("pebble: " + fmt.Sprintf(format, args...))
	panic(fmt.Sprintf(format, args...))
}
