package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meshctl/mesh/embedded/embeddedtest"
)

func TestStatusAndStandings(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	start(t, "subject=mesh.ev.node.auth-1", "--home", home, "up", "--listen", freeAddr(t), "--node", "auth-1", "--root", filepath.Join(t.TempDir(), "r"))
	mesh(t, home, "module", "register", "../../examples/postgres.json")
	mesh(t, home, "module", "register", "../../examples/app.json")
	// A standing is a provider's on its machine toward a consumer of it:
	// postgres on auth-1, and app, which consumes it, on auth-1 too.
	mesh(t, home, "assign", "auth-1", "postgres", "--set", "password=x")
	mesh(t, home, "assign", "auth-1", "app")
	if r := mesh(t, home, "status"); r.code != 1 || !strings.Contains(r.out, "never sent") || !strings.Contains(r.out, "not well") {
		t.Fatalf("status before a push: %+v", r)
	}
	mesh(t, home, "push")
	r := waitWell(t, home)
	if !strings.Contains(r.out, "well: all 1 node(s) current") {
		t.Fatalf("status after push: %+v", r)
	}
	failing := []string{"report", "failing", "--provider", "postgres", "--machine", "auth-1", "--consumer", "app", "--word", "token endpoint 503"}
	if r := mesh(t, home, failing...); r.code != 0 {
		t.Fatalf("report failing: %+v", r)
	}
	failing[len(failing)-1] = "connection refused"
	mesh(t, home, failing...)
	r = mesh(t, home, "status")
	if r.code != 1 || !strings.Contains(r.out, "postgres on auth-1 failing app since") || !strings.Contains(r.out, ": connection refused") || strings.Contains(r.out, "503") {
		t.Fatalf("status with a failing provider: %+v", r)
	}
	r = mesh(t, home, "status", "--json")
	var s map[string]any
	if err := json.Unmarshal([]byte(r.out), &s); err != nil || s["well"] != false {
		t.Fatalf("status --json: %v %s", err, r.out)
	}
	node := s["nodes"].([]any)[0].(map[string]any)
	for _, k := range []string{"name", "state", "sequence", "digest", "since"} {
		if _, ok := node[k]; !ok {
			t.Errorf("status --json node lacks %q", k)
		}
	}
	standing := s["standings"].([]any)[0].(map[string]any)
	for _, k := range []string{"provider", "machine", "consumer", "word", "since"} {
		if _, ok := standing[k]; !ok {
			t.Errorf("status --json standing lacks %q", k)
		}
	}
	recovered := []string{"report", "recovered", "--provider", "postgres", "--machine", "auth-1", "--consumer", "app"}
	mesh(t, home, recovered...)
	waitWell(t, home)
	if r := mesh(t, home, recovered...); r.code != 0 || !strings.Contains(r.out, "was not failing") {
		t.Fatalf("recovered with nothing failing: %+v", r)
	}
	// Unanswered, status cannot say whether the mesh is well: exit 3
	// (unknown), neither 2 (not understood) nor 1 (not well), whether no
	// bus or no controller answers (issue 28).
	if r := mesh(t, t.TempDir(), "--bus", "nats://"+freeAddr(t), "status"); r.code != 3 {
		t.Fatalf("status with no bus: %+v", r)
	}
	bare := embeddedtest.Server(t)
	if r := mesh(t, t.TempDir(), "--bus", bare.ClientURL(), "status"); r.code != 3 || !strings.Contains(r.err, "no mesh controller is answering") {
		t.Fatalf("status with no controller: %+v", r)
	}
}
