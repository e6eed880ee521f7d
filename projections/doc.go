// Package projections folds the mesh's event stream into Pebble read models:
// the only state commands read. One ordered consumer runs from the stored
// checkpoint+1; each commit writes the rows and the checkpoint (a stream
// sequence) in one Pebble batch, so whatever survives a crash is a prefix of
// the stream and replay covers the rest. Commits do not fsync: the stream is
// the durable record and the read models are disposable.
//
// The read models also remember which stream they were folded from (its name
// and creation time). Opened against a different or rewound stream they refuse
// to serve rather than answer with state the stream cannot explain.
//
// Six parts with a narrow interface to the fold live beside it, each its
// own package: pipeline, how a fold reads (messages decoded on a worker
// per core, handed to the folder in stream order, deferred commits made
// when due); rows, the binary form of the rows read most (bytes in, row
// out); provenance, whether a message is its rightful writer's, judged
// from the message alone on the decoding workers (rule 19's first half);
// admit, whether what the read models hold allows an event, the standing
// rule among it (the second half), reading rows through interfaces the
// fold's batch and a view serve; disk, where read models live on disk
// (generations named by CURRENT, snapshots for time travel); and
// published, the newest snapshot on the bus with its proof, for a
// controller with no read models to start from, asking the engine what
// only the rows say through its Models (published.go here). What stays
// here is what reads or writes the rows: the fold, the read models, the
// views, rebuild, verify and time travel.
package projections
