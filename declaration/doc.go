// Package declaration is the signed declaration: what a node is told, in the
// exact bytes the controller signs and the agent verifies. It is shared by
// both sides, so there is one definition of what "the signature covers" means.
//
// The signed bytes hold the mesh, the node, the sequence, when it was
// composed, the digest of the declaration sent before it to the node (a chain
// per node), the modules with their builds (or "unknown" for a hand-written
// declaration), the resources and what each consumer receives. Two digests
// name it: Digest, of exactly the signed bytes (one send, beyond doubt), and
// ContentDigest, of the content alone (everything but sequence, chain and
// time), which answers "would this node be sent something new?".
package declaration
