package wire

import "time"

// Artifacts (issue 32): the operator puts a file's bytes into the bus's
// object store itself, streaming, and the controller checks the object
// and records it (ArtifactStored). A put is asked twice: once before the
// upload, which refuses a name or a size the mesh will not take before a
// byte is sent (Upload says whether the bytes must be sent), and once
// after it, which reads the object back and records it.
const (
	SubjectArtifactPut    = APIPrefix + ".artifact.put"
	SubjectArtifactList   = APIPrefix + ".artifact.list"
	SubjectArtifactShow   = APIPrefix + ".artifact.show"
	SubjectArtifactRemove = APIPrefix + ".artifact.rm"
)

// ArtifactPutRequest names the bytes the command line hashed: their
// digest (hex sha256) and size, and the name to record them under.
type ArtifactPutRequest struct {
	CommandID string `json:"command_id"`
	Name      string `json:"name"`
	Digest    string `json:"digest"`
	Size      int64  `json:"size"`
}

// ArtifactPut is the answer: Upload when the bucket does not hold the
// bytes yet (nothing was recorded: send them, then ask again); otherwise
// whether a new event was appended (seq), and the name's row.
type ArtifactPut struct {
	Upload   bool        `json:"upload"`
	Bucket   string      `json:"bucket"`
	MaxBytes int64       `json:"max_bytes"`
	Changed  bool        `json:"changed"`
	Seq      uint64      `json:"seq,omitempty"`
	Artifact ArtifactRow `json:"artifact"`
}

// ArtifactRow is a name's read model: its latest digest and every digest
// stored under it and not removed, oldest first.
type ArtifactRow struct {
	Name     string            `json:"name"`
	Digest   string            `json:"digest"`
	Size     int64             `json:"size"`
	By       string            `json:"by"`
	StoredAt time.Time         `json:"stored_at"`
	Seq      uint64            `json:"seq"`
	Versions []ArtifactVersion `json:"versions"`
	Version  uint64            `json:"version"`
}

// ArtifactVersion is one digest stored under a name.
type ArtifactVersion struct {
	Digest   string    `json:"digest"`
	Size     int64     `json:"size"`
	By       string    `json:"by"`
	StoredAt time.Time `json:"stored_at"`
	Seq      uint64    `json:"seq"`
}

// ArtifactList is every artifact name that stands for bytes.
type ArtifactList struct {
	Artifacts []ArtifactRow `json:"artifacts"`
}

// ArtifactView is artifact show: the row, and which nodes were last sent
// a declaration naming each of its digests.
type ArtifactView struct {
	ArtifactRow
	InForce []ArtifactUse `json:"in_force"`
}

// ArtifactUse is one node whose last declaration installs a digest.
type ArtifactUse struct {
	Node     string `json:"node"`
	Digest   string `json:"digest"`
	Path     string `json:"path"`
	Sequence uint64 `json:"sequence"`
}

// ArtifactRemoveRequest removes a name and the objects only it holds.
type ArtifactRemoveRequest struct {
	CommandID string `json:"command_id"`
	Name      string `json:"name"`
}

// ArtifactRemoved is the answer: the digests removed, and the objects
// deleted from the bucket (a digest another name holds stays).
type ArtifactRemoved struct {
	Changed bool     `json:"changed"`
	Seq     uint64   `json:"seq,omitempty"`
	Name    string   `json:"name"`
	Digests []string `json:"digests"`
	Deleted []string `json:"deleted"`
}
