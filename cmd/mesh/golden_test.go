package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// update rewrites the golden files: go test ./cmd/mesh -run TestJSONOutputsMatchTheirGoldenFiles -update
var update = flag.Bool("update", false, "rewrite the golden files of the --json outputs")

var (
	rfc3339 = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$`)
	nkey    = regexp.MustCompile(`^[ACNOPUX][A-Z2-7]{55}$`)
	sha256  = regexp.MustCompile(`^[0-9a-f]{64}$`)
	// tokenID is an enrolment token's id, random, inside its subject.
	tokenID = regexp.MustCompile(`\.t[0-9a-f]{12}\.`)
	// Fields whose values differ at every run by nature: timings, the
	// signed bytes (they hold the moment of composition), ids.
	varying = map[string]bool{"seconds": true, "rate": true, "signature_rate": true, "declaration": true, "signature": true, "id": true, "command_id": true}
)

// normal replaces what differs between two runs of the same scenario
// (moments, keys, digests, timings) by its kind, so that a golden file
// pins the schema and every value that is the mesh's to decide.
func normal(v any, key string) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = normal(e, k)
		}
	case []any:
		for i, e := range x {
			x[i] = normal(e, key)
		}
	case string:
		switch {
		case varying[key]:
			return "<varies>"
		case rfc3339.MatchString(x):
			return "<time>"
		case nkey.MatchString(x):
			return "<key>"
		case sha256.MatchString(x):
			return "<sha256>"
		case strings.HasPrefix(x, "meshjoin1."):
			return "<join string>"
		case tokenID.MatchString(x):
			return tokenID.ReplaceAllString(x, ".<token>.")
		}
	case float64:
		if varying[key] {
			return 0
		}
	}
	return v
}

// Every --json output, after the same scenario, against its golden file
// (testdata/golden): the documented, stable schema of each (issue 16).
// Fails when a field is renamed, dropped or added without the golden
// file being updated on purpose (-update), and when any value the mesh
// decides (a state, a sequence, a count, a name) changes.
func TestJSONOutputsMatchTheirGoldenFiles(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	up(t, home)
	doc := filepath.Join(t.TempDir(), "motd.json")
	if err := writeFile(doc, `{"module":"motd","settings":{"greeting":{"default":"hi"}},"resources":[{"kind":"file","path":"/etc/motd","mode":"0644","template":"{{.Settings.greeting}}\n"}]}`); err != nil {
		t.Fatal(err)
	}
	outputs := []struct {
		name string
		args []string
	}{
		{"node-enroll", []string{"node", "enroll", "box", "-c", "linux", "-l", "zone=a", "--json"}},
		{"module-register", []string{"module", "register", doc, "--json"}},
		{"assign", []string{"assign", "box", "motd", "--set", "greeting=hello", "--json"}},
		{"plan", []string{"plan", "box", "--json"}},
		{"push-dry-run", []string{"push", "--dry-run", "--json"}},
		{"rollout-plan", []string{"rollout", "plan", "motd", "--wave", "all=*", "--json"}},
		{"push", []string{"push", "--json"}},
		{"status", []string{"status", "--json"}},
		{"node-list", []string{"node", "list", "--json"}},
		{"node-show", []string{"node", "show", "box", "--json"}},
		{"module-list", []string{"module", "list", "--json"}},
		{"module-show", []string{"module", "show", "motd", "--json"}},
		{"history", []string{"history", "box", "--json"}},
		{"audit", []string{"audit", "--json"}},
		{"foreign-list", []string{"foreign", "list", "--json"}},
		{"projections-status", []string{"projections", "status", "--json"}},
		{"events", []string{"events", "--json"}},
		// The writes last: a rollout's drive appends steps in its own time,
		// which events above would list some runs and not others.
		{"node-set", []string{"node", "set", "box", "-l", "zone=b", "--json"}},
		{"unassign", []string{"unassign", "box", "motd", "--json"}},
		{"node-retire", []string{"node", "retire", "box", "--json"}},
		{"rollout-start", []string{"rollout", "start", "motd", "--wave", "all=*", "--json"}},
	}
	for _, o := range outputs {
		if o.name == "rollout-start" {
			// Its own node: box is retired by now.
			mustRun(t, home, "node", "enroll", "box-2")
			mustRun(t, home, "assign", "box-2", "motd")
		}
		r := mesh(t, home, o.args...)
		if o.name == "rollout-start" {
			// The id a script needs, and the steps answer the same shape
			// (not golden: the drive may take a step before the abort).
			var started, aborted struct{ ID, State string }
			if err := json.Unmarshal([]byte(r.out), &started); err != nil || started.ID == "" {
				t.Fatalf("rollout start --json names no id (%v): %s%s", err, r.out, r.err)
			}
			a := mesh(t, home, "rollout", "abort", started.ID, "--json")
			if err := json.Unmarshal([]byte(a.out), &aborted); err != nil || aborted.ID != started.ID || aborted.State != "aborted" {
				t.Fatalf("rollout abort --json: %v %+v", err, a)
			}
		}
		if r.code > 1 { // status is 1 when not well: still an answer
			t.Fatalf("mesh %v: exit %d\n%s%s", o.args, r.code, r.out, r.err)
		}
		matchGolden(t, o.name, o.args, normalised(t, o.args, r.out))
	}
}

// normalised is out, the --json answer of mesh args, indented with what
// differs between runs replaced by its kind (normal).
func normalised(t *testing.T, args []string, out string) []byte {
	t.Helper()
	var got bytes.Buffer
	dec := json.NewDecoder(strings.NewReader(out))
	for dec.More() { // events --json is one object a line
		var v any
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("mesh %v is not JSON: %v\n%s", args, err, out)
		}
		enc := json.NewEncoder(&got)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		if err := enc.Encode(normal(v, "")); err != nil {
			t.Fatal(err)
		}
	}
	return got.Bytes()
}

// matchGolden holds got, an answer normalised, to testdata/golden/NAME.json
// (or writes it there, with -update).
func matchGolden(t *testing.T, name string, args []string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name+".json")
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%s: %v (write it with -update)", path, err)
	}
	if !bytes.Equal(want, got) {
		t.Errorf("mesh %v no longer matches %s; if the change is meant, run the test with -update and say so in ARCHITECTURE.md\ngot:\n%s", args, path, got)
	}
}
