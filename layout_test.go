// Package mesh_test holds the tests of the project's shape: which package may
// import which, and that every package says what it is for.
package mesh_test

import (
	"encoding/json"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
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
	// A row's codec is bytes alone: it needs neither the store it is
	// written to nor the bus it was folded from.
	// Where read models live is files alone: neither a row nor an event.
	"github.com/meshctl/mesh/projections/disk": {"github.com/meshctl/mesh/", "github.com/nats-io/"},
	// Rule 19's first half judges a message alone, on the decoding
	// workers: no read model, so no Pebble.
	"github.com/meshctl/mesh/projections/provenance": {"github.com/cockroachdb/pebble", "github.com/meshctl/mesh/projections", "github.com/meshctl/mesh/commands"},
	"github.com/meshctl/mesh/projections/rows":       {"github.com/cockroachdb/pebble", "github.com/nats-io/nats-server", "github.com/meshctl/mesh/projections", "github.com/meshctl/mesh/commands"},
	"github.com/meshctl/mesh/embedded":               {"github.com/cockroachdb/pebble", "github.com/meshctl/mesh/"},
	"github.com/meshctl/mesh/manifest":               {"github.com/nats-io/", "github.com/cockroachdb/pebble"},
	"github.com/meshctl/mesh/compose":                {"github.com/nats-io/", "github.com/cockroachdb/pebble", "github.com/meshctl/mesh/projections"},
	"github.com/meshctl/mesh/declaration":            {"github.com/nats-io/nats", "github.com/cockroachdb/pebble", "github.com/meshctl/mesh/projections"},
	"github.com/meshctl/mesh/agent":                  {"github.com/cockroachdb/pebble", "github.com/meshctl/mesh/projections", "github.com/meshctl/mesh/commands"},
	// A scan holds and decodes rows whole: which rows, and what they
	// mean, are the read models'.
	"github.com/meshctl/mesh/projections/scan": {"github.com/nats-io/", "github.com/meshctl/mesh/projections", "github.com/meshctl/mesh/commands", "github.com/meshctl/mesh/events"},
	// The pipeline decodes and orders messages for the folder: it neither
	// reads nor writes a row.
	"github.com/meshctl/mesh/projections/pipeline": {"github.com/cockroachdb/pebble", "github.com/nats-io/nats-server", "github.com/meshctl/mesh/commands"},
	// Admission reads the read models through its interfaces: no Pebble,
	// so no key, and no bus.
	"github.com/meshctl/mesh/projections/admit": {"github.com/cockroachdb/pebble", "github.com/nats-io/nats-server", "github.com/meshctl/mesh/commands"},
	// wire is the protocol alone, and client speaks only it: whoever only
	// talks to a controller links neither the read models' store nor the
	// bus's server (client once linked 58 Pebble packages through commands).
	"github.com/meshctl/mesh/wire":   {"github.com/cockroachdb/pebble", "github.com/nats-io/nats-server", "github.com/meshctl/mesh/projections", "github.com/meshctl/mesh/commands"},
	"github.com/meshctl/mesh/client": {"github.com/cockroachdb/pebble", "github.com/nats-io/nats-server", "github.com/meshctl/mesh/projections", "github.com/meshctl/mesh/commands"},
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

// The rules of the mesh are numbered in ARCHITECTURE.md; code, tests and
// docs cite them as "rule N" (or "rules N and M"). A citation of a rule
// that is not there, or of a document that is not in the repository (the
// design notes the project started from), is a pointer a reader cannot
// follow: it fails here.
func TestEveryCitationCanBeFollowed(t *testing.T) {
	doc, err := os.ReadFile("ARCHITECTURE.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rules, ok := strings.Cut(string(doc), "## The rules of the mesh")
	rules, _, _ = strings.Cut(rules, "\n## ")
	if !ok {
		t.Fatal(`ARCHITECTURE.md has no "## The rules of the mesh" section`)
	}
	numbered := map[int]bool{}
	for _, m := range regexp.MustCompile(`(?m)^(\d+)\. \*\*`).FindAllStringSubmatch(rules, -1) {
		n, _ := strconv.Atoi(m[1])
		numbered[n] = true
	}
	if len(numbered) < 28 {
		t.Fatalf("ARCHITECTURE.md numbers %d rules; the mesh has 28", len(numbered))
	}
	citation := regexp.MustCompile(`(?i)\brules? (\d+)((?:(?:, | and | or )\d+)*)`)
	outside := regexp.MustCompile(`nats-notes|style\.md|shared/design`)
	err = filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() && strings.HasPrefix(d.Name(), ".") && path != "." {
			if err == nil {
				return filepath.SkipDir
			}
			return err
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, ".md") || path == "layout_test.go" {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range citation.FindAllStringSubmatch(string(b), -1) {
			for _, n := range regexp.MustCompile(`\d+`).FindAllString(m[1]+m[2], -1) {
				if i, _ := strconv.Atoi(n); !numbered[i] {
					t.Errorf("%s cites rule %s, which ARCHITECTURE.md does not number (%q)", path, n, m[0])
				}
			}
		}
		if loc := outside.FindString(string(b)); loc != "" {
			t.Errorf("%s cites %s, which is not in the repository", path, loc)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// What each package may import beyond the standard library: the mesh's own
// packages by path, and the modules of external. A package importing
// anything else, or a package not listed, fails the test below; the fix
// is a line here, read by whoever reviews it.
var mayImport = map[string][]string{
	".":                      {},
	"agent":                  {"agent/logbook", "aggregates", "artifact", "compose", "declaration", "events", "events/store", "manifest", "secret", "wire", natsGo, nkeys},
	"agent/logbook":          {"wire"},
	"agent/agenttest":        {"agent", "artifact", "commands", "declaration", "embedded", "embedded/embeddedtest", "events", "projections", "wire", natsGo, nkeys},
	"aggregates":             {"events", "manifest"},
	"bench":                  {"embedded", "events", natsGo},
	"busauth":                {"declaration", "events", "github.com/nats-io/jwt/v2", "manifest", "wire", natsGo, nkeys},
	"client":                 {"aggregates", "events", "events/store", "wire", natsGo},
	"cmd/mesh":               {"agent", "artifact", "busauth", "client", "cmd/mesh/cmdline", "cmd/mesh/daemon", "cmd/mesh/text", "commands", "commands/secrets", "embedded", "events", "events/store", "github.com/alecthomas/kong", "github.com/posener/complete", "github.com/willabides/kongplete", "manifest", "wire", natsGo},
	"cmd/mesh/cmdline":       {"busauth", "client", "cmd/mesh/text", "embedded", "events/store", "github.com/alecthomas/kong", "wire", natsGo},
	"cmd/mesh/daemon":        {"agent", "aggregates", "bench", "busauth", "client", "cmd/mesh/cmdline", "commands", "declaration", "commands/liveness", "commands/reconcile", "embedded", "events", "events/store", "fanout", "fleet", "web", "wire", natsGo, nkeys},
	"commands":               {"aggregates", "artifact", "busauth", "commands/access", "commands/artifacts", "commands/core", "commands/credentials", "commands/history", "commands/liveness", "commands/modules", "commands/network", "commands/nodes", "commands/operators", "commands/push", "commands/reconcile", "commands/rollout", "commands/seats", "commands/secrets", "commands/status", "commands/world", "declaration", "events", "events/store", "projections", "projections/published", "wire", natsGo, nkeys},
	"commands/core":          {"aggregates", "commands/secrets", "declaration", "events", "events/store", "manifest", nkeys, "projections", "secret", "wire"},
	"commands/secrets":       {"aggregates", "compose", "declaration", "events", "events/store", "manifest", natsGo, "projections", "secret"},
	"commands/world":         {"aggregates", "commands/core", "commands/secrets", "compose", "events", "fanout", "manifest", "projections", "secret", "verdict", "wire"},
	"commands/core/coretest": {"commands/core", "compose", "declaration", "embedded/embeddedtest", "events", "events/store", natsGo, nkeys, "projections"},
	"commands/credentials":   {"aggregates", "commands/core", "commands/secrets", "commands/world", "compose", "declaration", "events", "events/store", "projections", "secret", "wire"},
	"commands/history":       {"aggregates", "commands/core", "compose", "declaration", "events", "events/store", "fanout", nkeys, "projections", "wire"},
	"commands/liveness":      {"commands/core", "declaration", "events", "events/store", natsGo, "projections", "wire"},
	"commands/network":       {"aggregates", "commands/core", "events", "events/store", "projections", "wire"},
	"commands/seats":         {"aggregates", "commands/core", "commands/world", "compose", "events", "events/store", natsGo, "projections", "secret", "wire"},
	"commands/status":        {"aggregates", "commands/core", "commands/credentials", "commands/liveness", "commands/push", "commands/seats", "commands/world", "events", "events/store", "manifest", natsGo, "projections", "verdict", "wire"},
	"commands/push":          {"aggregates", "commands/core", "commands/world", "compose", "declaration", "events", "events/store", "fanout", "manifest", "projections", "verdict", "wire"},
	"commands/reconcile":     {"commands/core", "commands/world", "compose", "events", "manifest", "projections", "verdict", "wire"},
	"commands/rollout":       {"aggregates", "commands/core", "commands/push", "commands/world", "compose", "events", "events/store", "manifest", "projections", "verdict", "wire"},
	"commands/access":        {"aggregates", "busauth", "commands/core", "commands/network", "commands/world", "compose", "declaration", "events", "events/store", "manifest", natsGo, nkeys, "projections", "verdict", "wire"},
	"commands/artifacts":     {"aggregates", "artifact", "commands/core", "compose", "events", "events/store", "manifest", natsGo, "projections", "wire"},
	"commands/modules":       {"aggregates", "commands/core", "commands/seats", "commands/world", "compose", "events", "manifest", natsGo, "projections", "wire"},
	"commands/operators":     {"aggregates", "commands/core", "events", nkeys, "projections", "wire"},
	"commands/nodes":         {"aggregates", "commands/core", "commands/network", "commands/world", "events", "events/store", "manifest", "projections", "secret", "wire"},
	"commands/commandstest":  {"agent/agenttest", "client", "commands", "embedded", "embedded/embeddedtest", "events", "events/store", natsGo, "wire"},
	"cmd/mesh/text":          {"compose", "manifest", "wire"},
	"compose":                {"manifest"},
	"declaration":            {"compose", nkeys},
	"embedded":               {natsGo, "github.com/nats-io/nats-server/v2"},
	"embedded/embeddedtest":  {"embedded", natsGo},
	"events":                 {},
	"events/store":           {"declaration", "events", natsGo},
	"examples":               {},
	"fanout":                 {},
	"examples/mesh-greeter":  {"events", "meshmod", natsGo},
	"fleet":                  {"agent", "compose", "declaration", "events", "events/store", "fanout", natsGo, nkeys},
	"manifest":               {"events"},
	"meshmod":                {"declaration", "events", "events/store", natsGo, nkeys},
	"projections":            {"compose", "declaration", "events", "events/store", "fanout", "projections/admit", "projections/disk", "projections/moved", "projections/pipeline", "projections/provenance", "projections/published", "projections/rows", "projections/scan", "wire", "github.com/cockroachdb/pebble/v2"},
	"projections/admit":      {"declaration", "events", "projections/provenance", "projections/rows"},
	"projections/disk":       {"github.com/cockroachdb/pebble/v2"},
	"projections/pipeline":   {"declaration", "events", "events/store", "projections/provenance"},
	"projections/foldtest":   {"declaration", "embedded/embeddedtest", "events/store", nkeys},
	"projections/provenance": {"compose", "declaration", "events", "events/store"},
	"projections/published":  {"events/store", "projections/disk", "github.com/cockroachdb/pebble/v2"},
	"projections/rows":       {"compose", "events", "wire"},
	"projections/scan":       {"fanout", "github.com/cockroachdb/pebble/v2"},
	"projections/moved":      {"events"},
	"secret":                 {},
	"artifact":               {"events", natsGo},
	"verdict":                {"events", "wire"},
	"wire":                   {"compose", "events", natsGo},
	"web":                    {"aggregates", "commands", "projections", "wire", "github.com/prometheus/client_golang"},
}

const (
	natsGo = "github.com/nats-io/nats.go"
	nkeys  = "github.com/nats-io/nkeys"
)

// external is every module outside the standard library the mesh's code
// imports, and why it beats writing that part (ARCHITECTURE.md,
// "Dependencies", says more). Tests may import more (go-cmp, chromedp).
var external = map[string]string{
	natsGo:                                "the bus's client: JetStream, key-value, the services protocol",
	nkeys:                                 "the bus's ed25519 keys, which sign declarations and reports (nats-server requires it already)",
	"github.com/nats-io/jwt/v2":           "the auth callout's answers (nats-server requires it already)",
	"github.com/nats-io/nats-server/v2":   "the embedded bus that makes one box a whole mesh",
	"github.com/cockroachdb/pebble/v2":    "the read models' store",
	"github.com/alecthomas/kong":          "the command line",
	"github.com/willabides/kongplete":     "shell completion for kong's commands, from their own definitions",
	"github.com/posener/complete":         "the predictor kongplete asks for the mesh's node and module names (kongplete requires it already)",
	"github.com/prometheus/client_golang": "/metrics in the exposition format Prometheus itself reads",
}

func TestEachPackageImportsOnlyWhatItMay(t *testing.T) {
	out, err := exec.Command("go", "list", "-json", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	const module = "github.com/meshctl/mesh"
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p struct {
			ImportPath string
			Imports    []string
		}
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/")
		if rel == "" {
			rel = "."
		}
		allowed, listed := mayImport[rel]
		if !listed {
			t.Errorf("package %s is not in mayImport: add it, with what it may import", rel)
			continue
		}
		for _, imp := range p.Imports {
			if !strings.Contains(strings.Split(imp, "/")[0], ".") {
				continue // the standard library
			}
			name := strings.TrimPrefix(strings.TrimPrefix(imp, module), "/")
			ok := false
			for _, a := range allowed {
				ok = ok || name == a || imp == a || strings.HasPrefix(imp, a+"/")
			}
			if !ok {
				t.Errorf("%s imports %s, which mayImport does not let it", rel, imp)
			}
			if !strings.HasPrefix(imp, module) {
				known := false
				for m := range external {
					known = known || imp == m || strings.HasPrefix(imp, m+"/")
				}
				if !known {
					t.Errorf("%s imports %s, a module external does not give a reason for", rel, imp)
				}
			}
		}
	}
}

// maxLines is how long a Go file may grow: past it, a file is nearly
// always two ideas, and a reader opening it for one wades through both.
const maxLines = 600

// Every Go file, tests too, stays within maxLines (ARCHITECTURE.md,
// "Layers"): a file that passes it is split by idea before it lands.
func TestEveryFileIsUnder600Lines(t *testing.T) {
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() && strings.HasPrefix(d.Name(), ".") && path != "." {
			if err == nil {
				return filepath.SkipDir
			}
			return err
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if n := strings.Count(string(b), "\n"); n > maxLines {
			t.Errorf("%s is %d lines, over %d: split it by idea", path, n, maxLines)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
