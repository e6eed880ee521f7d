package text

import "github.com/meshctl/mesh/wire"

// ArtifactNote says which artifact a program's process is (issue 32):
// "; artifact sha256 D", from its agent's word when it started it; ""
// for a program that is no artifact.
func ArtifactNote(rt wire.Runtime) string {
	if rt.Digest == "" {
		return ""
	}
	return "; artifact sha256 " + rt.Digest
}
