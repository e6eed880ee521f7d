// Package disk is where read models live on disk: a directory holding one
// Pebble per generation (gen-000001, gen-000002, ...), the file CURRENT
// naming the one in use, and beside them the snapshots that time travel
// starts from; and how Pebble holds them (Options: memtables, level 0,
// filters, cache, each chosen by measurement).
//
// It is its own package because it is about files alone, and its promises
// are about crashes: CURRENT changes by one synced rename, so a crash
// leaves the old generation or the new one named, never a half-folded one
// (rule 17); a snapshot is made aside and renamed into place, so a
// half-made one is never listed, and what a crash left half made is
// cleared at open. It never decides when: the engine in projections says
// which generation to name and when a commit is to be kept as a snapshot,
// and folds; this package neither reads a row nor folds an event.
package disk
