// Package published is the read models' snapshots on the bus (issue 34): a
// controller with no read models of its own (a new machine, a restored
// home, a reset) starts from the newest snapshot of this mesh's read
// models on the bus and folds only the stream's tail. At a million events
// a fold from the first takes about 20 CPU seconds; from a snapshot, the
// tail's share of that.
//
// A snapshot is believed only with its proof: the MAC, under the key the
// controller proves its events with (rule 19), of the stream it was folded
// from, the schema, the sequence it holds and the digest of its exact
// bytes, which the object store checks as they are read back. Whoever can
// write the bucket without the controller's key (a bus account, a mistake)
// cannot make a controller serve read models the log does not hold; such a
// snapshot is passed over, said, and the fold starts from the first event.
// `projections verify` then proves the read models it led to equal a fold
// from the start, as for any others (Bus.Verify).
//
// Each publish puts a brief snapshot beside the whole one: the same read
// models without their history index (nine tenths of the bytes at ten
// million events), marked as such inside its proven bytes. A start takes
// the brief one and serves; FillUntilWhole then brings the history index
// from a whole snapshot, as one table Pebble ingests (history.go). At ten
// million events a start was ready in 2.4-3.3 s this way, against 5.8-9.9
// s fetching the whole one first (docs/performance.md).
//
// It is its own package because it is about the bus and the proof, not
// about rows: it packs the newest snapshot kept on disk (disk's) and
// publishes it with its proof, says when the live fold is due to publish
// (Schedule), and fetches, checks and unpacks one. What only the read
// models can say of a copy of them (how Pebble opens them, the stream and
// schema they were folded from, the event they hold, how they differ from
// a fold from the first event) it asks the engine in projections through
// Models; it neither reads a row's format nor folds an event.
package published
