// Package bench is what mesh bench measures with: the floor of this
// machine (an ed25519 signature, a JetStream publish with the mesh's
// headers, an ordered read, each with bus and client in one process), the
// floor of a socket an agent (raw JetStream: a hub and agents, each part a
// process of its own, an agent on a socket of its own or all on one), the
// CPU time and memory of a process as the operating system counts them,
// and the table of issue 34 (each row per node and per push, its ratio
// against its floor, its bound). The processes themselves (the bus, the
// controller, the fleets) are started by cmd/mesh/daemon; nothing here
// stands in for a part of the mesh.
package bench
