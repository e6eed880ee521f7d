// Package commands starts the controller and serves its verbs. The verbs
// themselves live in packages named for their nouns under commands/ (push,
// rollout, status, nodes, modules, seats, network, access, credentials,
// history, liveness), each a service over one core.Core; Services is the one
// place each is handed the others it reads through, and Serve gives every
// verb an endpoint of the NATS micro service mesh-controller (nats micro ls
// shows it). Operator commands reach it through package client, in package
// wire's terms, so that a client links none of this (nor Pebble). The
// controller is the one process that opens Pebble.
package commands
