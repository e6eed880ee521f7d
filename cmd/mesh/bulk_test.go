package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The bulk verbs as an operator runs them: a node list of 2,500 (three
// batches), a list with a bad line refused before anything is sent, the
// same list again as nothing to do, and an assignment by selector.
func TestBulkEnrollAndAssign(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	up(t, home)
	var b strings.Builder
	b.WriteString("# the fleet\n\n")
	for i := range 2500 {
		fmt.Fprintf(&b, "fleet-%04d linux zone=z%d\n", i, i%5)
	}
	b.WriteString("spare-1\n")
	list := filepath.Join(t.TempDir(), "nodes.txt")
	os.WriteFile(list, []byte(b.String()), 0o600)

	bad := filepath.Join(t.TempDir(), "bad.txt")
	os.WriteFile(bad, []byte("ok-1 linux\nok-2 =x\n"), 0o600)
	r := mesh(t, home, "node", "enroll", "--from", bad)
	if r.code != 2 || !strings.Contains(r.err, "line 2") || strings.Count(r.err, "\n") != 1 {
		t.Fatalf("a list with a bad line: exit %d\n%s", r.code, r.err)
	}
	if r = mesh(t, home, "node", "list"); !strings.Contains(r.out, "no nodes enrolled") {
		t.Fatalf("a refused list enrolled something:\n%s", r.out)
	}

	r = mesh(t, home, "node", "enroll", "--from", list)
	if r.code != 0 || !strings.Contains(r.out, "enrolled 2501 node(s)") {
		t.Fatalf("enroll --from: exit %d\n%s%s", r.code, r.out, r.err)
	}
	if r = mesh(t, home, "node", "enroll", "--from", list); r.code != 0 || !strings.Contains(r.out, "enrolled 0 node(s)") || !strings.Contains(r.out, "2501 were already enrolled") {
		t.Fatalf("the same list again: exit %d\n%s%s", r.code, r.out, r.err)
	}
	if r = mesh(t, home, "node", "show", "fleet-0007"); !strings.Contains(r.out, "zone=z2") || !strings.Contains(r.out, "linux") {
		t.Fatalf("a listed node's labels and capabilities:\n%s", r.out)
	}

	manifest := filepath.Join(t.TempDir(), "tool.json")
	os.WriteFile(manifest, []byte(`{"module":"tool","requires":["linux"],"resources":[{"kind":"file","path":"/etc/tool","mode":"0644","content":"x\n"}]}`), 0o600)
	if r = mesh(t, home, "module", "register", manifest); r.code != 0 {
		t.Fatalf("register: %s", r.err)
	}
	r = mesh(t, home, "assign", "--selector", "zone=z1,capability=linux", "tool")
	if r.code != 0 || !strings.Contains(r.out, "to 500 node(s) of the selector zone=z1,capability=linux") {
		t.Fatalf("assign --selector: exit %d\n%s%s", r.code, r.out, r.err)
	}
	if r = mesh(t, home, "assign", "--selector", "zone=nowhere", "tool"); r.code != 1 || !strings.Contains(r.err, "no active node matches") {
		t.Fatalf("a selector that chooses nothing: exit %d\n%s", r.code, r.err)
	}
	if r = mesh(t, home, "assign", "--selector", "*", "tool", "extra"); r.code != 2 {
		t.Fatalf("a node and a selector both: exit %d\n%s", r.code, r.err)
	}
	names := filepath.Join(t.TempDir(), "names.txt")
	os.WriteFile(names, []byte("fleet-0002\nfleet-0006\nspare-1\n"), 0o600)
	if r = mesh(t, home, "assign", "--from", names, "tool"); r.code != 0 || !strings.Contains(r.out, "to 2 node(s)") || !strings.Contains(r.out, "1 already had it") {
		t.Fatalf("assign --from: exit %d\n%s%s", r.code, r.out, r.err)
	}
}
