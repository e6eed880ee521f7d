// Package artifacts keeps the artifacts (issue 32): a put, which checks the
// bytes the operator uploaded into the bus's object store and records them
// (ArtifactStored), the list, show and removal (refused while a declaration
// in force names it), and the answer to an agent asking for an artifact its
// declaration names: a consumer of that object alone, which the bus then
// serves to that node (artifact.Hand). The controller never carries the
// bytes to a node.
package artifacts
