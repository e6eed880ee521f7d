package events

// A running module's place on the bus (issue 15): each module a node runs
// connects with an identity of its own, derived from the node's, and may
// use only these subjects.

// ServicePrefix is where modules serve what they provide and ask for what
// they consume: mesh.svc.<requirement>.> is requirement's.
const ServicePrefix = "mesh.svc"

// ServiceSubjects are the subjects of one requirement's service.
func ServiceSubjects(requirement string) string { return ServicePrefix + "." + requirement + ".>" }

// ServiceSubject is where a provider of requirement on node answers: a
// consumer asks there (or on mesh.svc.<requirement>.any to be answered by
// any provider).
func ServiceSubject(requirement, node string) string {
	return ServicePrefix + "." + requirement + "." + node
}

// ModuleUser is the user name a running module connects with: its node
// and its module, which the controller checks its key against. Neither
// name may hold '/'.
func ModuleUser(node, module string) string { return node + "/" + module }

// ModuleInbox is the inbox prefix of a running module: a token of its own,
// so that neither its node's identity nor another module's reads its
// replies ("_INBOX_db-1~app", beside the node's "_INBOX_db-1").
func ModuleInbox(node, module string) string { return NodeInbox(node) + "~" + module }

// StateBucket is the key-value bucket a module that runs keeps its state
// in, one per module, shared by its instances on every node.
func StateBucket(module string) string { return "mesh-state-" + module }
