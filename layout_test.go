// Package mesh_test holds the tests of the project's shape: which package may
// import which, and that every package says what it is for.
package mesh_test

import (
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The dependency rules of ARCHITECTURE.md. A package matching the key must
// not import anything with one of the listed prefixes.
var forbidden = map[string][]string{
	"github.com/meshctl/mesh/events":       {"github.com/nats-io/", "github.com/cockroachdb/pebble"},
	"github.com/meshctl/mesh/events/store": {"github.com/cockroachdb/pebble", "github.com/meshctl/mesh/projections", "github.com/meshctl/mesh/commands"},
	"github.com/meshctl/mesh/aggregates":   {"github.com/nats-io/", "github.com/cockroachdb/pebble", "github.com/meshctl/mesh/events/store"},
	"github.com/meshctl/mesh/projections":  {"github.com/meshctl/mesh/commands", "github.com/meshctl/mesh/aggregates"},
	"github.com/meshctl/mesh/embedded":     {"github.com/cockroachdb/pebble", "github.com/meshctl/mesh/"},
	"github.com/meshctl/mesh/manifest":     {"github.com/nats-io/", "github.com/cockroachdb/pebble"},
	"github.com/meshctl/mesh/compose":      {"github.com/nats-io/", "github.com/cockroachdb/pebble", "github.com/meshctl/mesh/projections"},
	"github.com/meshctl/mesh/declaration":  {"github.com/nats-io/nats", "github.com/cockroachdb/pebble", "github.com/meshctl/mesh/projections"},
	"github.com/meshctl/mesh/agent":        {"github.com/cockroachdb/pebble", "github.com/meshctl/mesh/projections", "github.com/meshctl/mesh/commands"},
}

func TestDependencyDirection(t *testing.T) {
	for pkg, bad := range forbidden {
		out, err := exec.Command("go", "list", "-deps", pkg).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", pkg, err)
		}
		for _, dep := range strings.Fields(string(out)) {
			if dep == pkg {
				continue
			}
			for _, b := range bad {
				if strings.HasPrefix(dep, b) {
					t.Errorf("%s depends on %s, which the layout forbids", pkg, dep)
				}
			}
		}
	}
}

func TestEveryPackageHasADocComment(t *testing.T) {
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() || strings.HasPrefix(d.Name(), ".") && path != "." {
			if d != nil && d.IsDir() && strings.HasPrefix(d.Name(), ".") && path != "." {
				return filepath.SkipDir
			}
			return err
		}
		pkgs, err := parser.ParseDir(token.NewFileSet(), path, func(fi os.FileInfo) bool {
			return !strings.HasSuffix(fi.Name(), "_test.go")
		}, parser.ParseComments|parser.PackageClauseOnly)
		if err != nil {
			return err
		}
		for name, p := range pkgs {
			documented := false
			for _, f := range p.Files {
				if f.Doc != nil && strings.TrimSpace(f.Doc.Text()) != "" {
					documented = true
				}
			}
			if !documented {
				t.Errorf("package %s in %s has no doc comment", name, path)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
