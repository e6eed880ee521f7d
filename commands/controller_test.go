package commands

import (
	"runtime/debug"
	"testing"
)

// A start's catch-up lets the collector run half as often and puts it back
// after, and leaves it alone when GOGC was given.
func TestCatchUpGC(t *testing.T) {
	was := debug.SetGCPercent(100)
	defer debug.SetGCPercent(was)

	t.Setenv("GOGC", "")
	restore := catchUpGC()
	if during := debug.SetGCPercent(200); during != 200 {
		t.Fatalf("during the catch-up the collector's percent is %d, want 200", during)
	}
	restore()
	if after := debug.SetGCPercent(100); after != 100 {
		t.Fatalf("after the catch-up the collector's percent is %d, want 100 as before", after)
	}

	t.Setenv("GOGC", "50")
	debug.SetGCPercent(50)
	restore = catchUpGC()
	if during := debug.SetGCPercent(50); during != 50 {
		t.Fatalf("with GOGC=50 the catch-up set the collector's percent to %d", during)
	}
	restore()
}
