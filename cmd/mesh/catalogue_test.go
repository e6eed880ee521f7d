package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The walkthrough of the README: register the examples, enroll two nodes,
// assign provider and consumer, plan; then take the provider away.
func TestCatalogueAssignAndPlan(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	up(t, home)
	must := func(args ...string) result {
		t.Helper()
		r := mesh(t, home, args...)
		if r.code != 0 {
			t.Fatalf("mesh %v: exit %d\n%s%s", args, r.code, r.out, r.err)
		}
		return r
	}
	r := must("module", "register", "../../examples/postgres.json")
	if !strings.Contains(r.out, "registered postgres as build") {
		t.Fatalf("register: %+v", r)
	}
	if r = must("module", "register", "../../examples/postgres.json"); !strings.Contains(r.out, "already registered as build") {
		t.Fatalf("register again: %+v", r)
	}
	must("module", "register", "../../examples/app.json")
	must("node", "enroll", "db-1", "-c", "linux")
	must("node", "enroll", "web-1", "-c", "linux")
	must("assign", "db-1", "postgres", "--set", "password=s3cret", "--set", "port=6543")
	must("assign", "web-1", "app")
	if r = must("assign", "web-1", "app"); !strings.Contains(r.out, "already assigned") {
		t.Fatalf("assign again: %+v", r)
	}

	r = must("plan", "web-1")
	if !strings.Contains(r.out, "database = db-1:6543") || !strings.Contains(r.out, "app receives postgres from postgres on db-1") {
		t.Fatalf("the consumer's config lacks its provider's node and port:\n%s", r.out)
	}
	r = must("plan", "web-1", "--json")
	var plan map[string]any
	if err := json.Unmarshal([]byte(r.out), &plan); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"node", "digest", "resources", "left_out", "unresolved", "changes"} {
		if _, ok := plan[k]; !ok {
			t.Errorf("plan --json lacks %q", k)
		}
	}
	if d, _ := plan["digest"].(string); len(d) != 64 {
		t.Errorf("plan digest %q", plan["digest"])
	}
	if r = must("node", "show", "db-1"); !strings.Contains(r.out, "postgres build") {
		t.Fatalf("node show does not say which build the node has:\n%s", r.out)
	}
	if r = must("module", "show", "postgres"); !strings.Contains(r.out, "assigned to   db-1") {
		t.Fatalf("module show does not say where it is assigned:\n%s", r.out)
	}

	must("unassign", "db-1", "postgres")
	r = mesh(t, home, "plan", "web-1")
	if r.code != 1 || !strings.Contains(r.out, "unresolved: app needs postgres, which no assigned module provides") ||
		!strings.Contains(r.err, "web-1 cannot be composed") {
		t.Fatalf("plan after the provider left: %+v", r)
	}
	r = must("plan", "db-1")
	if !strings.Contains(r.out, "an empty declaration") {
		t.Fatalf("the provider's node does not plan an empty declaration:\n%s", r.out)
	}
	if r = must("unassign", "db-1", "postgres"); !strings.Contains(r.out, "nothing to do") {
		t.Fatalf("unassign again: %+v", r)
	}
}

// An upgrade: re-registering changed content makes a new build, and assigning
// again takes it to the node.
func TestUpgradeByAssigningAgain(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	up(t, home)
	dir := t.TempDir()
	file := filepath.Join(dir, "m.json")
	os.WriteFile(file, []byte(`{"module":"m","resources":[{"kind":"file","path":"/m","mode":"0644","content":"v1\n"}]}`), 0o644)
	mesh(t, home, "module", "register", file)
	mesh(t, home, "node", "enroll", "n1")
	mesh(t, home, "assign", "n1", "m")
	os.WriteFile(file, []byte(`{"module":"m","resources":[{"kind":"file","path":"/m","mode":"0644","content":"v2\n"}]}`), 0o644)
	if r := mesh(t, home, "module", "register", file); !strings.Contains(r.out, "was ") {
		t.Fatalf("re-register: %+v", r)
	}
	if r := mesh(t, home, "node", "show", "n1"); !strings.Contains(r.out, "moves it") {
		t.Fatalf("node show does not say a newer build exists:\n%s", r.out)
	}
	if r := mesh(t, home, "assign", "n1", "m"); r.code != 0 || !strings.Contains(r.out, "(from ") {
		t.Fatalf("assign again: %+v", r)
	}
	if r := mesh(t, home, "plan", "n1"); !strings.Contains(r.out, "| v2") {
		t.Fatalf("plan after upgrade:\n%s", r.out)
	}
}

func TestCatalogueRefusals(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	up(t, home)
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"module":"x","colour":"red"}`), 0o644)
	mesh(t, home, "module", "register", "../../examples/postgres.json")
	mesh(t, home, "node", "enroll", "db-1", "-c", "linux")
	mesh(t, home, "node", "enroll", "gone")
	mesh(t, home, "node", "retire", "gone")
	before := mesh(t, home, "events", "--json").out
	cases := []struct {
		args []string
		say  string
	}{
		{[]string{"module", "register", bad}, `unknown field "colour"`},
		{[]string{"module", "register", filepath.Join(dir, "missing.json")}, "missing.json"},
		{[]string{"module", "show", "nope"}, "no module of that name is registered"},
		{[]string{"assign", "db-9", "postgres", "--set", "password=x"}, "no node db-9 is enrolled"},
		{[]string{"assign", "gone", "postgres", "--set", "password=x"}, "gone is retired"},
		{[]string{"assign", "db-1", "nope"}, "no module of that name is registered"},
		{[]string{"assign", "db-1", "postgres", "--set", "password=x", "--set", "colour=red"}, `no setting "colour"`},
		{[]string{"assign", "db-1", "postgres"}, "setting password is required"},
		{[]string{"unassign", "db-9", "postgres"}, "no node db-9 is enrolled"},
		{[]string{"plan", "db-9"}, "no node of that name is enrolled"},
		{[]string{"plan", "gone"}, "retired"},
	}
	for _, c := range cases {
		r := mesh(t, home, c.args...)
		if r.code == 0 || !strings.Contains(r.err, c.say) || strings.Count(strings.TrimSpace(r.err), "\n") != 0 {
			t.Errorf("mesh %v: exit %d, stderr %q; want a non-zero exit saying %q in one line", c.args, r.code, r.err, c.say)
		}
	}
	if after := mesh(t, home, "events", "--json").out; after != before {
		t.Fatalf("refused commands changed the log:\n%s", after[len(before):])
	}
}
