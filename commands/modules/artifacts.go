package modules

import (
	"fmt"

	"github.com/meshctl/mesh/aggregates"
	"github.com/meshctl/mesh/manifest"
	"github.com/meshctl/mesh/projections"
)

// resolveArtifacts fills each artifact resource named by name with the
// digest the name stands for now (issue 32): the digest is then in the
// canonical manifest, so the build changes with the bytes, and a node on
// the old build keeps the old bytes until a rollout or an assign takes
// the new. A resource naming a digest is held to one the mesh has. An
// artifact the mesh does not hold is refused, naming it and the remedy.
func resolveArtifacts(v *projections.View, file string, m *manifest.Manifest) error {
	for _, i := range m.Artifacts() {
		r := &m.Resources[i]
		if r.Artifact != "" && r.Digest == "" {
			row, found, err := v.Artifact(r.Artifact)
			if err != nil {
				return err
			}
			if !found {
				return aggregates.Refuse("register", file, aggregates.ErrUnknown,
					fmt.Sprintf("%s's artifact resource %s names artifact %s, which the mesh does not hold: mesh artifact put FILE --name %s first", m.Module, r.Path, r.Artifact, r.Artifact))
			}
			r.Digest = row.Digest
			continue
		}
		if _, found, err := v.ArtifactObject(r.Digest); err != nil || !found {
			if err != nil {
				return err
			}
			return aggregates.Refuse("register", file, aggregates.ErrUnknown,
				fmt.Sprintf("%s's artifact resource %s names digest %s, which the mesh does not hold: mesh artifact put the file first (mesh artifact list shows what it holds)", m.Module, r.Path, manifest.ShortBuild(r.Digest)))
		}
	}
	return nil
}
