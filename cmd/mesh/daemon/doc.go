// Package daemon holds the commands that run the mesh rather than ask it:
// mesh up and serve (the bus, the controller, its HTTP listener and the
// reconciler), mesh agent on a node, mesh fleet, the load harness of
// real agents, and mesh bench, which runs a bus, a controller and fleets as
// processes of their own and measures each against the machine's floor.
// They stand on cmdline, as the verbs in package main do.
package daemon

// Examples for their --help, as every command has (issue 16).

func (c *AgentCmd) Help() string {
	return "Examples:\n  mesh agent --join-file /etc/mesh/join --root /\n  MESH_JOIN=... mesh agent --root ./roots/web-1 --drift report"
}

func (c *ServeCmd) Help() string {
	return "Examples:\n  MESH_NATS_URL=tls://nats-1:4222 mesh serve --replicas 3 --closed --tls-ca ca.pem"
}
