// Package pipeline is how a fold reads: a fold spends most of its time
// decoding JSON, and decoding one event does not depend on another, so
// messages are decoded in chunks by a worker per core (each held to its
// writer's right by provenance there), while one goroutine hands the
// decoded events to the folder strictly in stream order. Order is kept by
// handing that goroutine the chunks in the order they were read and
// letting it wait for each one's decoding to finish. It also makes the
// commits the folder defers (its trickle window) when they fall due, and
// commits what came before a failure and ends the read.
//
// It is its own package because it is about concurrency and order alone,
// with a narrow interface to the fold: messages in from a read, decoded
// events out to a Folder (apply one, commit now or when due, be woken by a
// waiter), one goroutine at a time. It reads no row and writes none; what
// an event does to the read models, and when a commit is due, is the
// folder's in projections.
package pipeline
