package manifest

import (
	"fmt"

	"github.com/meshctl/mesh/events"
)

// An artifact resource (issue 32) installs the bytes of an artifact the
// operator put into the mesh (mesh artifact put): by name, which
// registration resolves to the name's latest digest, or by digest alone.
// The digest is in the manifest, so a new put under the same name,
// registered, is a new build, and rollouts take it like any other.

// DigestLen is the length of an artifact's digest: hex sha256.
const DigestLen = 64

// ValidDigest says whether d is an artifact digest: 64 lowercase hex
// digits, the object's name in the bucket.
func ValidDigest(d string) bool {
	if len(d) != DigestLen {
		return false
	}
	for _, c := range d {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

func (r Resource) validateArtifact() error {
	if r.Kind != KindArtifact {
		if r.Artifact != "" || r.Digest != "" {
			return fmt.Errorf("%s %s has artifact or digest; only an artifact resource has those", r.Kind, r.Path)
		}
		return nil
	}
	switch {
	case r.Content != nil || r.Template != nil:
		return fmt.Errorf("artifact %s has content or template; its bytes are the artifact's (mesh artifact put FILE)", r.Path)
	case r.Artifact == "" && r.Digest == "":
		return fmt.Errorf(`artifact %s names no artifact: give "artifact": NAME (what mesh artifact put stored) or "digest": its sha256`, r.Path)
	case r.Digest != "" && !ValidDigest(r.Digest):
		return fmt.Errorf("artifact %s: digest %q is not a sha256 in 64 lowercase hex digits (mesh artifact list shows them)", r.Path, r.Digest)
	case r.Artifact != "":
		if err := events.ValidateName("artifact", r.Artifact); err != nil {
			return fmt.Errorf("artifact %s: %w", r.Path, err)
		}
	}
	return nil
}

// Artifacts are the manifest's artifact resources, by index.
func (m Manifest) Artifacts() []int {
	var out []int
	for i, r := range m.Resources {
		if r.Kind == KindArtifact {
			out = append(out, i)
		}
	}
	return out
}
