//go:build cgo && linux

package core

// /* glibc's malloc_trim, declared weak so that a C library without it
//    (musl) still links, and trim then does nothing. */
// extern int malloc_trim(unsigned long pad) __attribute__((weak));
// static void trim(void) { if (malloc_trim) malloc_trim(0); }
import "C"

// trimC gives the C heap's free pages back to the system, as
// debug.FreeOSMemory does the Go heap's. Pebble's block cache and
// memtables are C memory, and glibc keeps what they free in its arenas:
// a controller holding 10,000 nodes, quiet after a million events of
// traffic, held 182-199 MiB resident with a live Go heap of 27 MB
// (docs/performance.md, "The C heap given back when quiet").
func trimC() { C.trim() }
