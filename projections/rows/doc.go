// Package rows is the binary form of the four rows the mesh reads most: a
// node's row, an assignment, an entry of a node's history and a node's
// liveness. The other read models' rows are JSON; these were measured too
// costly in it (node rows were most of status and of a fold's one
// goroutine, assignment rows over half of composing a mesh, history rows
// the size of the index, liveness rows a fifth of a second of a status of
// a fleet lost).
//
// It is its own package because it is one idea with the narrowest of
// interfaces to the fold: a row in, bytes out, and back, with no Pebble,
// no keys and no events read. Its promises are about bytes alone (one row
// has one encoding; a row truncated anywhere is refused, never half read;
// every field has its place), so its tests are round trips that need no
// stream and no store. The types live here with their codecs, since a
// field added to a row without a place in its codec would vanish on the
// next fold (TestCodecSamplesFillEveryField); projections names them by
// aliases. Changing an encoding changes what Pebble holds: bump
// schemaVersion in projections/keys.go, so read models written the old
// way are folded again rather than misread.
package rows
