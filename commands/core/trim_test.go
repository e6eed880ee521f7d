//go:build !race

package core

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
)

// What Pebble frees (its block cache's blocks, its memtables) glibc keeps
// in its arenas, resident, until the C heap is trimmed: trimC gives it
// back, as a quiet controller does (idleRelease).
//
// Not under the race detector: Pebble then allocates in the Go heap in
// half of all processes, and glibc holds nothing of it.
func TestTrimCGivesBackWhatPebbleFreed(t *testing.T) {
	if !canTrim() {
		t.Skip("no malloc_trim here (no cgo, not Linux, or not glibc): Pebble's memory is not glibc's to give back")
	}
	cache := pebble.NewCache(64 << 20)
	db, err := pebble.Open(t.TempDir(), &pebble.Options{Cache: cache, MemTableSize: 4 << 20, Logger: quiet{}})
	if err != nil {
		t.Fatal(err)
	}
	value := bytes.Repeat([]byte("x"), 1000)
	for i := range 48_000 {
		if err := db.Set(fmt.Appendf(nil, "row-%06d", i), value, pebble.NoSync); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	it, err := db.NewIter(nil) // every block read into the cache
	if err != nil {
		t.Fatal(err)
	}
	for it.First(); it.Valid(); it.Next() {
	}
	it.Close()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	cache.Unref()

	before := residentMiB(t)
	trimC()
	after := residentMiB(t)
	t.Logf("resident %d MiB before the trim, %d after", before, after)
	if before-after < 16 {
		t.Fatalf("resident %d MiB before trimming the C heap and %d after: Pebble's freed blocks were not given back", before, after)
	}
}

// quiet is a Pebble logger that says nothing ("Found 0 WALs").
type quiet struct{}

func (quiet) Infof(string, ...any)  {}
func (quiet) Errorf(string, ...any) {}
func (quiet) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf(format, args...))
}

// residentMiB is this process's resident memory.
func residentMiB(t *testing.T) int {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
			if err != nil {
				t.Fatal(err)
			}
			return kb >> 10
		}
	}
	t.Fatal("no VmRSS in /proc/self/status")
	return 0
}
