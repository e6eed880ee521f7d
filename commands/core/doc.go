// Package core is what every verb of the controller stands on: what a
// controller is (Self: its bus, log, mesh name, keys and secrets), the read
// models it answers from (Core), and the one way a verb writes: decide on
// what it read, append expecting the version read, decide again on a
// conflict (DecideAndAppend), and answer once the read models hold the
// write (Landed). It also keeps whether the bus takes events now
// (SetBusTrouble), so every write is refused or cut the same way.
//
// The verbs themselves live in packages named for their nouns (nodes,
// push, rollout, status, ...), each a service over a *Core; package
// commands wires them into the controller.
package core
