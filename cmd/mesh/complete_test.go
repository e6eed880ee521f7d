package main

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Completion answers node and module names from the mesh the line being
// completed names (issue 31, point 10): Tab after node show lists its
// nodes, after assign NODE its modules; a line naming a home no mesh
// answers for completes no name, and still exits 0.
func TestCompletionNamesTheMeshsNodesAndModules(t *testing.T) {
	t.Setenv("MESH_NATS_URL", "")
	home := t.TempDir()
	up(t, home)
	mustRun(t, home, "node", "enroll", "web-1")
	mustRun(t, home, "node", "enroll", "web-2")
	mustRun(t, home, "node", "enroll", "db-1")
	mustRun(t, home, "module", "register", "../../examples/motd.json")
	complete := func(line string) []string {
		t.Helper()
		t.Setenv("COMP_LINE", line)
		r := mesh(t, home)
		if r.code != 0 {
			t.Fatalf("completing %q: %+v", line, r)
		}
		return strings.Fields(r.out)
	}
	cases := []struct {
		line string
		want []string
	}{
		{"mesh --home " + home + " node show web-", []string{"web-1", "web-2"}},
		{"mesh --home=" + home + " node show ", []string{"db-1", "web-1", "web-2"}},
		{"mesh --home " + home + " assign web-1 ", []string{"motd"}},
		{"mesh --home " + home + " seat handover builder --to d", []string{"db-1"}},
		{"mesh --home " + home + " rotate postgres --consumer m", []string{"motd"}},
		// Another home: its names, here none, never this one's.
		{"mesh --home " + filepath.Join(t.TempDir(), "none") + " node show ", nil},
	}
	for _, c := range cases {
		got := complete(c.line)
		slices.Sort(got)
		if !slices.Equal(got, c.want) {
			t.Errorf("completing %q: %q, want %q", c.line, got, c.want)
		}
	}
}
