package compose

import (
	"strings"
	"testing"

	"github.com/meshctl/mesh/manifest"
)

// An artifact resource composes to its digest and size, and the program
// that is its path carries the digest; one whose digest the mesh does not
// hold (removed, or never put) is named at composition with the remedy,
// and the node is not composed (issue 32). Fails when a declaration names
// bytes the mesh cannot hand, or drops the digest or size.
func TestAnArtifactComposesToItsDigestOrIsNamedMissing(t *testing.T) {
	t.Parallel()
	digest := strings.Repeat("ab", 32)
	m := mustParse(t, `{"module":"tool","resources":[{"kind":"artifact","path":"/opt/tool","mode":"0755","artifact":"tool","digest":"`+digest+`"}],
	  "run":{"command":"/opt/tool"}}`)
	in := Input{Mesh: "test", Nodes: []Node{{Name: "box"}},
		Assignments: []Assignment{{Node: "box", Module: "tool", Build: m.Build()}},
		Manifests:   map[BuildRef]manifest.Manifest{{"tool", m.Build()}: m},
		Artifacts:   map[string]int64{digest: 42}}
	r := NewWorld(in).Compose("box")
	if !r.Composable() {
		t.Fatalf("box cannot be composed: %s", r.Reason())
	}
	if got := r.Declaration.Resources[0]; got.Digest != digest || got.Size != 42 || got.Artifact != "tool" || got.Content != nil {
		t.Fatalf("the artifact composed to %+v", got)
	}
	if r.Declaration.Runs[0].Digest != digest {
		t.Fatalf("the program that is the artifact composed to %+v", r.Declaration.Runs[0])
	}
	in.Artifacts = map[string]int64{}
	r = NewWorld(in).Compose("box")
	if r.Composable() || !strings.Contains(r.Reason(), "the artifact tool (abababababab) of tool at /opt/tool is not in the mesh: put it again") {
		t.Fatalf("a missing artifact: composable %v, %q", r.Composable(), r.Reason())
	}
}
