// Package store keeps the mesh's events on a JetStream stream: it asserts the
// stream, appends one decision's events with optimistic concurrency on the
// aggregate's canonical filter (idempotent by command id), loads one
// aggregate, and reads the stream in order for replay.
//
// Every write to an aggregate goes through Append, which always uses
// AggregateID.Filter: on replicated streams an expectation only sees in-flight
// writes that used the same filter string, so a second write path with another
// filter would let a conflicting write be accepted.
package store
