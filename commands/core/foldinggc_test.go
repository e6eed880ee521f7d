package core

import (
	"runtime/debug"
	"testing"
)

// A long fold lets the collector run half as often and puts it back after
// the last of those running ends, and leaves it alone when GOGC was given.
func TestFoldingGC(t *testing.T) {
	was := debug.SetGCPercent(100)
	defer debug.SetGCPercent(was)

	t.Setenv("GOGC", "")
	first, second := FoldingGC(), FoldingGC()
	if during := debug.SetGCPercent(200); during != 200 {
		t.Fatalf("during two folds the collector's percent is %d, want 200", during)
	}
	first()
	first() // twice is once
	if during := debug.SetGCPercent(200); during != 200 {
		t.Fatalf("with one fold still running the collector's percent is %d, want 200", during)
	}
	second()
	if after := debug.SetGCPercent(100); after != 100 {
		t.Fatalf("after the folds the collector's percent is %d, want 100 as before", after)
	}

	t.Setenv("GOGC", "50")
	debug.SetGCPercent(50)
	restore := FoldingGC()
	if during := debug.SetGCPercent(50); during != 50 {
		t.Fatalf("with GOGC=50 the catch-up set the collector's percent to %d", during)
	}
	restore()
}
