package events

// Artifacts (issue 32): files the operator puts into the bus's object store
// (bucket ArtifactBucket), each object named by the sha256 of its bytes,
// which a manifest's artifact resource installs on a node. A name is an
// aggregate of its own (mesh.ev.artifact.<name>.>): each put under it is an
// append expecting its version, so two puts never both claim to be its
// latest. The bytes never travel in the log, only their digest and size.

// KindArtifact is the aggregate kind of artifact names.
const KindArtifact = "artifact"

// ArtifactAggregate is the artifact called name.
func ArtifactAggregate(name string) AggregateID { return AggregateID{Kind: KindArtifact, ID: name} }

// ArtifactBucket is the JetStream object store bucket holding every
// artifact's bytes, each object named by its digest (hex sha256).
const ArtifactBucket = "mesh-artifacts"

// ArtifactStream is the stream under ArtifactBucket, as JetStream names it.
const ArtifactStream = "OBJ_" + ArtifactBucket

// ArtifactPrefix is where an agent asks the controller to be handed the
// bytes of an artifact its declaration names (ArtifactSubject): the
// controller checks the declaration and makes the node's one consumer of
// that object; the bus carries the bytes. Not in any stream.
const ArtifactPrefix = "mesh.artifact"

// ArtifactSubject is where node's agent asks for an artifact.
func ArtifactSubject(node string) string { return ArtifactPrefix + "." + node }

// ArtifactStored: the bytes of digest (hex sha256, Size bytes) are in the
// bucket, and Name stands for them from now on. By is who put them: the
// operator the controller proved the call came from, or "operator" on an
// open bus (and in every event before operators had names).
type ArtifactStored struct {
	Name   string `json:"name"`
	Digest string `json:"digest"`
	Size   int64  `json:"size"`
	By     string `json:"by"`
}

// ArtifactRemoved: the objects of these digests, stored under Name, are
// gone from the bucket, and Name stands for nothing (when Digests held its
// latest). By is who removed it, as ArtifactStored's.
type ArtifactRemoved struct {
	Name    string   `json:"name"`
	Digests []string `json:"digests"`
	By      string   `json:"by"`
}

func (ArtifactStored) EventType() string  { return "ArtifactStored" }
func (ArtifactRemoved) EventType() string { return "ArtifactRemoved" }
