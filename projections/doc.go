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
package projections
