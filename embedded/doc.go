// Package embedded runs a nats-server with JetStream inside the mesh process,
// so one box is a whole mesh with nothing else installed. Start returns only
// when the server accepts connections and JetStream answers; Close stops it and
// waits, so a data directory is never opened by two servers at once.
//
// StartCluster starts several servers routed into one cluster in this process:
// the distributed engine the tests of replicated streams run against. It is
// NATS clustering, not something of ours.
package embedded
