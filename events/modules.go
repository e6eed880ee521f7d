package events

// A running module's place on the bus (issue 15): each module a node runs
// connects with an identity of its own, derived from the node's, and may
// use only these subjects.

// ServicePrefix is where modules serve what they provide and ask for what
// they consume: mesh.svc.<requirement>.> is requirement's.
const ServicePrefix = "mesh.svc"

// ServiceAny is the token that stands for any provider in a service
// subject (mesh.svc.<requirement>.any). No node may be called this, or a
// provider elsewhere could serve that node's endpoint.
const ServiceAny = "any"

// ServiceSubject is where a provider of requirement on node answers: a
// consumer asks there (or on ServiceSubject(requirement, ServiceAny) to be
// answered by any provider).
func ServiceSubject(requirement, node string) string {
	return ServicePrefix + "." + requirement + "." + node
}

// ServiceEndpoints are the subjects a consumer of requirement may ask on:
// any one provider's node, or any provider. Only the provider's node is a
// token, never more, so a request cannot reach a subject no provider
// answers on.
func ServiceEndpoints(requirement string) string { return ServicePrefix + "." + requirement + ".*" }

// ModuleUser is the user name a running module connects with: its node
// and its module, which the controller checks its key against. Neither
// name may hold '/'.
func ModuleUser(node, module string) string { return node + "/" + module }

// ModuleInbox is the inbox prefix of a running module: a token of its own,
// so that neither its node's identity nor another module's reads its
// replies ("_INBOX_db-1~app", beside the node's "_INBOX_db-1").
func ModuleInbox(node, module string) string { return NodeInbox(node) + "~" + module }

// StateBucket is the key-value bucket a module that runs keeps its state
// in, one per module, shared by its instances on every node. Each instance
// owns the keys under StatePrefix(node) and may touch no other, so one
// node's instance cannot read or rewrite another's state. (A bucket per
// node and module would be a stream each: ten thousand nodes running one
// module would be ten thousand streams.)
func StateBucket(module string) string { return "mesh-state-" + module }

// StatePrefix is the start of every key the instance on node owns in its
// module's state bucket ("web-1."). Node names hold no '.', so the prefix
// is exactly one subject token.
func StatePrefix(node string) string { return node + "." }
