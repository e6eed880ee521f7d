package compose

import (
	"fmt"

	"github.com/meshctl/mesh/manifest"
)

// artifact fills out, an artifact resource of module, with its digest and
// size: what the controller signs is exactly which bytes the node writes.
// A digest the bucket does not hold by the log (removed, or named by a
// manifest and never put) is the node's problem, named with the remedy,
// rather than a declaration the node could never apply.
func (w *World) artifact(module string, r manifest.Resource, out *Resource) error {
	what := r.Digest
	if r.Artifact != "" {
		what = fmt.Sprintf("%s (%s)", r.Artifact, manifest.ShortBuild(r.Digest))
	}
	if r.Digest == "" {
		return fmt.Errorf("the artifact %s of %s at %s has no digest: register %s again, which resolves it", r.Artifact, module, r.Path, module)
	}
	size, ok := w.artifacts[r.Digest]
	if !ok {
		return fmt.Errorf("the artifact %s of %s at %s is not in the mesh: put it again (mesh artifact put FILE), or register %s with one that is (mesh artifact list)",
			what, module, r.Path, module)
	}
	out.Artifact, out.Digest, out.Size = r.Artifact, r.Digest, size
	return nil
}

// runsArtifact is the digest of the artifact resource of m whose path is
// command, or "" when the program is not one of its artifacts.
func runsArtifact(m *manifest.Manifest, command string) string {
	for _, i := range m.Artifacts() {
		if r := m.Resources[i]; r.Path == command {
			return r.Digest
		}
	}
	return ""
}
