package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/meshctl/mesh/embedded/embeddedtest"
)

// From enrolment to files on disk: mesh up with a local agent, a second
// agent from its join string, push, and push --wait.
func TestPushToAgents(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	dbRoot := filepath.Join(t.TempDir(), "db")
	start(t, "subject=mesh.ev.node.db-1", "--home", home, "up", "--listen", freeAddr(t), "--node", "db-1", "--root", dbRoot)
	must := func(args ...string) result {
		t.Helper()
		r := mesh(t, home, args...)
		if r.code != 0 {
			t.Fatalf("mesh %v: exit %d\n%s%s", args, r.code, r.out, r.err)
		}
		return r
	}
	r := must("node", "enroll", "app-1", "-c", "linux")
	lines := strings.Split(strings.TrimSpace(r.out), "\n")
	join := lines[len(lines)-1]
	appRoot := filepath.Join(t.TempDir(), "app")
	start(t, "following", "--home", home, "agent", "--join", join, "--root", appRoot)

	must("node", "show", "db-1") // enrolled by mesh up --node
	must("module", "register", "../../examples/postgres.json")
	must("module", "register", "../../examples/app.json")
	// db-1 was enrolled by mesh up without capabilities: its agent's
	// facts say linux, so postgres is hosted there (issue 15).
	embeddedtest.Eventually(t, "db-1's agent to report its facts", func() bool { return strings.Contains(must("node", "show", "db-1").out, "detected") })
	must("assign", "db-1", "postgres", "--set", "password=p")
	if r = must("push", "db-1"); strings.Contains(r.out, "left out") {
		t.Fatalf("push to a node whose agent detected linux: %+v", r)
	}
	// A module needing what it neither declares nor detects is left out.
	gpu := filepath.Join(t.TempDir(), "gpu.json")
	if err := writeFile(gpu, `{"module":"gpu-job","requires":["gpu"],"resources":[]}`); err != nil {
		t.Fatal(err)
	}
	must("module", "register", gpu)
	must("assign", "db-1", "gpu-job")
	r = must("push", "db-1")
	if !strings.Contains(r.out, "left out") {
		t.Fatalf("push to a node that cannot host its module: %+v", r)
	}
	// What was asked is not what runs: partial, never current or well.
	embeddedtest.Eventually(t, "status to call db-1 partial, gpu-job left out", func() bool {
		r = mesh(t, home, "status")
		return r.code == 1 && strings.Contains(r.out, "partial") && strings.Contains(r.out, "gpu-job left out: gpu-job needs gpu")
	})
	must("unassign", "db-1", "gpu-job")
	must("unassign", "db-1", "postgres")
	must("assign", "app-1", "postgres", "--set", "password=p")
	must("assign", "app-1", "app")
	r = must("push")
	if !strings.Contains(r.out, "sent app-1 7 resource(s), sequence 1") || !strings.Contains(r.out, "sent 2 of 2 node(s)") {
		t.Fatalf("push: %+v", r)
	}
	r = must("push", "app-1", "--wait", "10s")
	if !strings.Contains(r.out, "app-1 applied sequence 2") {
		t.Fatalf("push --wait: %+v", r)
	}
	conf, err := os.ReadFile(filepath.Join(appRoot, "etc/app/app.conf"))
	if err != nil || !strings.Contains(string(conf), "database = app-1:5432") {
		t.Fatalf("app.conf: %q %v", conf, err)
	}
	if r := mesh(t, home, "push", "app-1", "--behind"); r.code != 2 || !strings.Contains(r.err, "not both") {
		t.Fatalf("named and --behind: %+v", r)
	}
	if r := mesh(t, home, "push", "ghost"); r.code != 1 || !strings.Contains(r.err, "no node of that name") {
		t.Fatalf("unknown node: %+v", r)
	}
	body := filepath.Join(t.TempDir(), "hand.json")
	os.WriteFile(body, []byte(`{"resources":[{"kind":"file","path":"/etc/motd","mode":"0644","content":"hello\n"}]}`), 0o644)
	r = must("declare", "app-1", body, "--wait", "10s")
	if !strings.Contains(r.out, "builds unknown") || !strings.Contains(r.out, "applied sequence 3") {
		t.Fatalf("declare: %+v", r)
	}
	if b, _ := os.ReadFile(filepath.Join(appRoot, "etc/motd")); string(b) != "hello\n" {
		t.Fatalf("declared file: %q", b)
	}
	if _, err := os.Stat(filepath.Join(appRoot, "etc/app/app.conf")); err == nil {
		t.Fatal("a hand declaration without app.conf left the file the mesh had created")
	}
	// A hand declaration holds app-1: held in status, left out (and named)
	// by every push that does not name it, sent by one that does.
	waitWell(t, home)
	if r = must("status"); !regexp.MustCompile(`app-1 +3 +held .*hand declaration`).MatchString(r.out) {
		t.Fatalf("status after a hand declaration: %s", r.out)
	}
	for _, args := range [][]string{{"push", "--behind"}, {"push"}} {
		if r = must(args...); strings.Contains(r.out, "sent app-1") || !strings.Contains(r.out, "left out app-1, held: hand declaration") {
			t.Fatalf("%v after a hand declaration: %+v", args, r)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(appRoot, "etc/motd")); string(b) != "hello\n" {
		t.Fatalf("a push that did not name app-1 replaced its hand-declared file: %q", b)
	}
	if r = must("push", "app-1", "--wait", "10s"); !strings.Contains(r.out, "sent app-1") {
		t.Fatalf("a push naming the held node: %+v", r)
	}
	waitWell(t, home)
	if r = must("push", "--behind"); !strings.Contains(r.out, "every machine is doing what it was told") {
		t.Fatalf("push --behind with every node applied: %+v", r)
	}
	if r = must("history", "app-1", "--diff"); !strings.Contains(r.out, "sent     sequence 3 by declare") || !strings.Contains(r.out, "removed /etc/app/app.conf") ||
		!strings.Contains(r.out, "applied  sequence 3") || !strings.Contains(r.out, "resource(s) written or removed") || !strings.Contains(r.out, "builds app@") {
		t.Fatalf("history --diff: %s", r.out)
	}
	if r = must("audit", "app-1"); !strings.Contains(r.out, "the record holds") {
		t.Fatalf("audit: %s", r.out)
	}
	if r = must("audit"); !strings.Contains(r.out, "the record holds") || !strings.Contains(r.out, "app-1: 4 declaration(s)") {
		t.Fatalf("audit of the whole mesh: %s", r.out)
	}
	if r = must("foreign", "list"); !strings.Contains(r.out, "no foreign messages") {
		t.Fatalf("foreign list: %s", r.out)
	}
	if r = must("projections", "verify"); !strings.Contains(r.out, "equal a fresh fold") {
		t.Fatalf("verify: %+v", r)
	}
	if r = mesh(t, home, "status", "--as-of", "1h"); !strings.Contains(r.out, "THE PAST") || !strings.Contains(r.out, "no active nodes") {
		t.Fatalf("status --as-of 1h: %+v", r)
	}
	if r = mesh(t, home, "status", "--as-of", "yesterday"); r.code != 2 {
		t.Fatalf("a malformed --as-of: %+v", r)
	}
	if r = mesh(t, home, "node", "show", "app-1", "--as-of", "2020-01-01T00:00:00Z"); r.code != 1 ||
		!strings.Contains(r.err, "was enrolled as of 2020-01-01T00:00:00Z; it was enrolled at ") {
		t.Fatalf("node show before the node was enrolled: %+v", r)
	}
	if r = mesh(t, home, "history", "app-1", "--since", "1h", "--until", "2h"); r.code == 0 || !strings.Contains(r.err, "swap them") {
		t.Fatalf("history --since after --until: %+v", r)
	}
	// Its agent made its keys: a join string again is refused, naming
	// the re-key, which is what a new machine for it takes (issue 29).
	if r = mesh(t, home, "node", "join", "app-1"); r.code != 2 || !strings.Contains(r.err, "mesh node rekey app-1") {
		t.Fatalf("node join of a node with its own keys: %+v", r)
	}
	must("node", "retire", "app-1")
	if r := mesh(t, home, "push", "app-1"); r.code != 1 || !strings.Contains(r.err, "retired") {
		t.Fatalf("push to a retired node: %+v", r)
	}
}

// waitWell polls mesh status until it says well (exit 0).
func waitWell(t *testing.T, home string) result {
	t.Helper()
	var r result
	embeddedtest.Eventually(t, "the mesh to become well", func() bool { r = mesh(t, home, "status"); return r.code == 0 })
	return r
}
