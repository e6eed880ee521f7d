//go:build cgo && linux

package core

// /* glibc's malloc_trim, declared weak so that a C library without it
//    (musl) still links, and trim then does nothing. */
// #include <stddef.h>
// extern int malloc_trim(size_t pad) __attribute__((weak));
// static void trim(void) { if (malloc_trim) malloc_trim(0); }
// static int can_trim(void) { return malloc_trim != 0; }
import "C"

// trimC gives the C heap's free pages back to the system, as
// debug.FreeOSMemory does the Go heap's. Pebble's block cache and
// memtables are C memory, and glibc keeps what they free in its arenas:
// quiet after a million events of traffic, a controller holding 10,000
// nodes was resident at 182-199 MiB with a live Go heap of 27 MB, and at
// 159-169 with the trim (docs/performance.md, "The C heap given back when
// quiet"). glibc locks each arena in turn while it gives its pages back,
// so a C allocation made meanwhile (Pebble's, on a fold still running)
// may wait that long: it is called when quiet, or once a long fold ends.
func trimC() { C.trim() }

// canTrim says whether trimC gives anything back here.
func canTrim() bool { return C.can_trim() != 0 }
