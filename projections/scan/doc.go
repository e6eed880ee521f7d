// Package scan reads a read model's rows whole: every row of a key range
// copied out of Pebble's iterator into one arena, then decoded on every
// core. Status at 100,000 nodes reads every node row this way, so how a
// scan holds and decodes its rows is most of what such a read costs
// (issue 34); the read models themselves (package projections) say only
// which range and how a row decodes. Compare walks two read models in key
// order at once, for verify and for a brief snapshot against its whole one.
package scan
