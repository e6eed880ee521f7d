package examples

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/meshctl/mesh/manifest"
)

func TestExamplesAreValidManifests(t *testing.T) {
	files, _ := filepath.Glob("*.json")
	if len(files) < 2 {
		t.Fatalf("only %d example manifests", len(files))
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := manifest.Parse(data); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}
