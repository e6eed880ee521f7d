// Package artifact is the bus's side of artifacts (issue 32): the object
// store bucket that holds their bytes, each object named by its sha256;
// hashing a file and an object without holding either in memory; the
// controller handing a node one object (a consumer of that object's chunks
// alone, named for the node, which only that node may read: Hand); and the
// agent reading it through that consumer, verifying the digest as the
// bytes arrive (Fetch). The controller never carries the bytes: the bus
// does, once per node.
package artifact
