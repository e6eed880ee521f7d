package core

import (
	"os"
	"runtime/debug"
	"sync"
)

// FoldingGC lets the collector run half as often while a long fold runs (a
// start's catch-up, a rebuild), unless GOGC says otherwise, and answers what
// puts it back once no long fold runs. A fold's live heap is small and its
// garbage large, so the collector ran often for little: a million real
// events caught up in 15.1-16.0 s with the default and 13.4-14.5 s at 200
// (peak RSS 160 against 230 MiB; at 400, 12.1-13.7 s but 350-385 MiB), and
// rebuilt in 14.4-15.8 s against 11.8-14.5 s (peak 225-265 MiB). Verify,
// which holds two generations, keeps the default. The memory limit holds
// either way.
func FoldingGC() (restore func()) {
	if os.Getenv("GOGC") != "" {
		return func() {}
	}
	gcFolds.Lock()
	defer gcFolds.Unlock()
	if gcFolds.n == 0 {
		gcFolds.was = debug.SetGCPercent(200)
	}
	gcFolds.n++
	var once sync.Once
	return func() {
		once.Do(func() {
			gcFolds.Lock()
			defer gcFolds.Unlock()
			if gcFolds.n--; gcFolds.n == 0 {
				debug.SetGCPercent(gcFolds.was)
			}
		})
	}
}

// gcFolds counts the long folds running, and what the collector's setting
// was before the first.
var gcFolds struct {
	sync.Mutex
	n   int
	was int
}
