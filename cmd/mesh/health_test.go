package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/meshctl/mesh/embedded/embeddedtest"
)

// pids masks a program's pid, which differs at every run, in --json.
var pids = regexp.MustCompile(`("pid": ?)\d+|(pid )\d+`)

// hostFacts masks what the agent detected of the machine the test runs on
// (its kernel, cores, hostname, distribution), which a golden file of one
// machine would hold against every other: the golden failed on a machine
// whose kernel was a build newer.
var hostFacts = regexp.MustCompile(`"facts": \{[^}]*\}`)

// A program's health check as an operator meets it (issue 31): a module
// whose check fails until a file exists under the node's root; status
// says unhealthy with the check's words and exits 1, then healthy once
// the file is there, and node show says it too, each in --json with its
// golden file (status-health, node-show-health).
func TestStatusAndNodeShowSayAProgramsHealth(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	up(t, home)
	mustRun(t, home, "node", "enroll", "box")
	root := filepath.Join(t.TempDir(), "root")
	start(t, "following", "--home", t.TempDir(), "agent", "--join", joinOf(t, home, "box"), "--root", root)
	doc := filepath.Join(t.TempDir(), "svc.json")
	if err := writeFile(doc, `{"module":"svc","run":{"command":"/bin/sh","args":["-c","exec sleep 600"],
	  "health":{"command":["/bin/sh","-c","test -e ready || { echo no ready file >&2; exit 1; }"],"interval":"1s","timeout":"1s","failures":1}}}`); err != nil {
		t.Fatal(err)
	}
	mustRun(t, home, "module", "register", doc)
	mustRun(t, home, "assign", "box", "svc")
	mustRun(t, home, "push", "box", "--wait", "10s")
	embeddedtest.Eventually(t, "status to say svc is unhealthy", func() bool {
		return strings.Contains(mesh(t, home, "status").out, "; unhealthy since ")
	})
	r := mesh(t, home, "status")
	if r.code != 1 || !strings.Contains(r.out, ": 1 failed check(s) in a row; the check /bin/sh exited with code 1: no ready file\n") ||
		!strings.Contains(r.out, "not well: 1 node(s) current, nothing failing, but 1 program(s) not running or unhealthy\n") {
		t.Fatalf("status with an unhealthy program: exit %d\n%s", r.code, r.out)
	}
	matchGolden(t, "status-health", []string{"status", "--json"}, pids.ReplaceAllString(mesh(t, home, "status", "--json").out, "${1}${2}0"))

	if err := os.WriteFile(filepath.Join(root, "ready"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	embeddedtest.Eventually(t, "node show to say svc is healthy", func() bool {
		return strings.Contains(mesh(t, home, "node", "show", "box").out, "; healthy since ")
	})
	if r := mesh(t, home, "status"); r.code != 0 || !strings.Contains(r.out, "well: all 1 node(s) current, all 1 program(s) running") {
		t.Fatalf("status with a healthy program: exit %d\n%s", r.code, r.out)
	}
	shown := pids.ReplaceAllString(mesh(t, home, "node", "show", "box", "--json").out, "${1}${2}0")
	if !strings.Contains(shown, `"kernel": `) {
		t.Fatalf("node show --json holds no facts of the machine, which the golden file masks:\n%s", shown)
	}
	matchGolden(t, "node-show-health", []string{"node", "show", "box", "--json"}, hostFacts.ReplaceAllString(shown, `"facts": "<this machine's>"`))
}
