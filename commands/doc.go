// Package commands holds the mesh's verbs and the controller that serves them.
// A handler reads projections, asks an aggregate to decide, appends what it
// decided, and waits until the projections have folded its own events before
// it answers, so the next command reads its own writes. The controller is the
// one process that opens Pebble; operator commands reach it as requests to
// the NATS micro service mesh-controller (nats micro ls shows it), sent by
// package client. The request and reply types and the subjects are here.
package commands
