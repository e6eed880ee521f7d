package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/meshctl/mesh/manifest"
)

// walk is one run of the README's walk through as a test runs it
// (TestTheREADMEWalkthrough, TestEveryJSONAnswerFollowsTheOneRule): where
// its files are, the free ports that stand for the README's, the modules
// that run (for settle), and the greeter its go build lines built last.
type walk struct {
	work  string
	ports map[string]string // a port the README names -> a free one here
	runs  map[string]bool
	// greeter is the mesh-greeter the walk's latest go build made, which
	// its artifact put stores.
	greeter string
}

func newWalk(t *testing.T) *walk {
	return &walk{work: t.TempDir(), ports: map[string]string{}, runs: map[string]bool{}}
}

// port is the free port that stands for the README's: the greeter's
// health ports, which another test or run may hold.
func (w *walk) port(t *testing.T, readme string) string {
	if _, ok := w.ports[readme]; !ok {
		w.ports[readme] = freePort(t)
	}
	return w.ports[readme]
}

// asInREADME puts the README's ports back in a transcript, where the
// free ones stand for them.
func (w *walk) asInREADME(transcript string) string {
	var pairs []string
	for readme, free := range w.ports {
		pairs = append(pairs, `"`+free+`"`, `"`+readme+`"`, "127.0.0.1:"+free, "127.0.0.1:"+readme)
	}
	return strings.NewReplacer(pairs...).Replace(transcript)
}

// goBuild runs one of the README's go build lines of mesh-greeter, with
// its -ldflags, from the repository's root: the first is the build this
// test binary made once (greeterBinary); one with -ldflags is other bytes,
// so another artifact digest and another build of greeter.
func (w *walk) goBuild(t *testing.T, line string) {
	t.Helper()
	args := readmeArgs(strings.TrimPrefix(line, "go "))
	if !strings.HasSuffix(line, "./examples/mesh-greeter") {
		t.Fatalf("%s: the walk through builds only mesh-greeter", line)
	}
	var ldflags string
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "-ldflags="); ok {
			ldflags = v
		}
	}
	if ldflags == "" {
		w.greeter = greeterBinary(t)
		return
	}
	w.greeter = filepath.Join(t.TempDir(), "mesh-greeter")
	build := exec.Command("go", "build", "-ldflags="+ldflags, "-o", w.greeter, "./examples/mesh-greeter")
	build.Dir = "../.."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", line, err, out)
	}
}

// command is the arguments of one mesh command of the README's walk
// through, as this test runs it: its examples/ files from the
// repository's root, the greeter's health ports moved to free ones; the
// modules that run are added to runs, for settle.
func (w *walk) command(t *testing.T, line, cmdline string) []string {
	t.Helper()
	args := readmeArgs(cmdline)
	if len(args) > 2 && args[0] == "artifact" && args[1] == "put" && args[2] == "mesh-greeter" {
		// The README built it in the repository's root (go build -o
		// mesh-greeter); this test where goBuild says.
		if w.greeter == "" {
			w.greeter = greeterBinary(t)
		}
		args[2] = w.greeter
	}
	for i, a := range args {
		if strings.HasSuffix(a, ".nk") && !filepath.IsAbs(a) {
			// An operator's key file, written and read in the walk
			// through's own directory, not the repository's.
			args[i] = filepath.Join(w.work, a)
		}
		if v, ok := strings.CutPrefix(a, "port="); ok && i > 0 && args[i-1] == "--set" && slices.Contains(args, "greeter") {
			args[i] = "port=" + w.port(t, v)
		}
		if strings.HasPrefix(a, "examples/") {
			// The README runs from the repository's root; this test
			// from cmd/mesh.
			args[i] = "../../" + a
			b, err := os.ReadFile(args[i])
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			if m, err := manifest.Parse(b); err == nil && m.Run != nil {
				w.runs[m.Module] = true
			}
			if strings.HasPrefix(a, "examples/greeter") {
				args[i] = filepath.Join(t.TempDir(), filepath.Base(a))
				if err := os.WriteFile(args[i], []byte(onPort(t, string(b), w.port(t, greeterPort))), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	return args
}
