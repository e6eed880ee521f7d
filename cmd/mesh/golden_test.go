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
	rfc3339       = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$`)
	rfc3339Within = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)`)
	nkey          = regexp.MustCompile(`^[ACNOPUX][A-Z2-7]{55}$`)
	sha256        = regexp.MustCompile(`^[0-9a-f]{64}$`)
	// tokenID is an enrolment token's id, random, inside its subject.
	tokenID = regexp.MustCompile(`\.t[0-9a-f]{12}\.`)
	// Fields whose values differ at every run by nature: timings, the
	// signed bytes (they hold the moment of composition), ids.
	varying = map[string]bool{"seconds": true, "rate": true, "signature_rate": true, "declaration": true, "signature": true, "id": true, "command_id": true, "dir": true, "key_file": true}
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
		default:
			// A sentence may name a moment (a handover's "sent T").
			return rfc3339Within.ReplaceAllString(x, "<time>")
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
			// A wait on it ends at once: the rollout as it ended, exit 1.
			var waited struct{ ID, State string }
			w := mesh(t, home, "rollout", "wait", started.ID, "--for", "1m", "--json")
			if err := json.Unmarshal([]byte(w.out), &waited); err != nil || w.code != 1 || waited.ID != started.ID || waited.State != "aborted" {
				t.Fatalf("rollout wait --json of an aborted rollout: %v %+v", err, w)
			}
		}
		if r.code > 1 { // status is 1 when not well: still an answer
			t.Fatalf("mesh %v: exit %d\n%s%s", o.args, r.code, r.out, r.err)
		}
		matchGolden(t, o.name, o.args, r.out)
	}
}

// matchGolden holds out, a --json output (one value, or JSON lines), to
// testdata/golden/<name>.json once normal made it the same at every run;
// -update writes it instead.
func matchGolden(t *testing.T, name string, args []string, out string) {
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
	path := filepath.Join("testdata", "golden", name+".json")
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%s: %v (write it with -update)", path, err)
	}
	if !bytes.Equal(want, got.Bytes()) {
		t.Errorf("mesh %v no longer matches %s; if the change is meant, run the test with -update and say so in ARCHITECTURE.md\ngot:\n%s", args, path, got.String())
	}
}

// The --json of the writes the first scenario cannot reach (a rotation, a
// forget, a seat, the network, tokens, join strings, a backup) and of the
// lists beside them, against their golden files: the ids a script follows
// up (seq, a token's id, handover_seq) are in each.
func TestJSONOfTheWritesMatchTheirGoldenFiles(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	up(t, home)
	for _, n := range []string{"db", "app", "b-1", "b-2"} {
		mustRun(t, home, "node", "enroll", n, "-c", "linux")
	}
	for _, m := range []string{"postgres", "app", "builder"} {
		mustRun(t, home, "module", "register", "../../examples/"+m+".json")
	}
	if r := meshWithStdin(t, home, "s3cret\n", "assign", "db", "postgres", "--set-file", "password=-"); r.code != 0 {
		t.Fatalf("assign db postgres: %+v", r)
	}
	mustRun(t, home, "assign", "app", "app")
	mustRun(t, home, "assign", "b-1", "builder")
	mustRun(t, home, "push")
	backup := filepath.Join(t.TempDir(), "backup")
	list := filepath.Join(t.TempDir(), "nodes.txt")
	if err := writeFile(list, "web-1 linux zone=a\nweb-2 linux zone=a\ndb linux\n"); err != nil {
		t.Fatal(err)
	}
	outputs := []struct {
		name string
		args []string
	}{
		{"rotate", []string{"rotate", "postgres", "--consumer", "app", "--json"}},
		{"report-failing", []string{"report", "failing", "--provider", "postgres", "--machine", "db", "--consumer", "app", "--word", "down", "--json"}},
		{"report-recovered", []string{"report", "recovered", "--provider", "postgres", "--machine", "db", "--consumer", "app", "--json"}},
		{"secret-forget", []string{"secret", "forget", "db", "postgres", "password", "--json"}},
		// No agent applies b-1's declaration without the seat: the
		// handover stands waiting, the same at every run.
		{"seat-handover", []string{"seat", "handover", "builder", "--to", "b-2", "--json"}},
		{"seat-list", []string{"seat", "list", "--json"}},
		{"network-set", []string{"network", "set", "10.42.0.0/16", "--json"}},
		{"network-address", []string{"network", "address", "db", "10.42.0.200", "--json"}},
		{"network-show", []string{"network", "show", "--json"}},
		{"node-join", []string{"node", "join", "app", "--json"}},
		{"node-rekey", []string{"node", "rekey", "db", "--json"}},
		{"token-list", []string{"token", "list", "--json"}},
		{"node-enroll-from", []string{"node", "enroll", "--from", list, "--json"}},
		{"assign-selector", []string{"assign", "--selector", "zone=a", "app", "--json"}},
		{"operator-add", []string{"operator", "add", "ci", "--role", "deployer", "--out", filepath.Join(t.TempDir(), "ci.nk"), "--json"}},
		{"operator-show", []string{"operator", "show", "ci", "--json"}},
		{"operator-remove", []string{"operator", "remove", "ci", "--json"}},
		{"operator-list", []string{"operator", "list", "--json"}},
		{"projections-verify", []string{"projections", "verify", "--json"}},
		{"projections-rebuild", []string{"projections", "rebuild", "--json"}},
		{"backup", []string{"backup", backup, "--json"}},
	}
	for _, o := range outputs {
		r := mesh(t, home, o.args...)
		if r.code != 0 {
			t.Fatalf("mesh %v: exit %d\n%s%s", o.args, r.code, r.out, r.err)
		}
		matchGolden(t, o.name, o.args, r.out)
	}
	var made struct{ Token struct{ ID string } }
	r := mesh(t, home, "token", "create", "--json")
	if err := json.Unmarshal([]byte(r.out), &made); err != nil || made.Token.ID == "" {
		t.Fatalf("token create --json: %v %+v", err, r)
	}
	r = mesh(t, home, "token", "revoke", made.Token.ID, "--json")
	var revoked Revoked
	if err := json.Unmarshal([]byte(r.out), &revoked); err != nil || revoked.ID != made.Token.ID || !revoked.Changed || revoked.Seq == 0 {
		t.Fatalf("token revoke --json names not the token and its event: %v %+v", err, r)
	}
	matchGolden(t, "token-revoke", []string{"token", "revoke", "ID", "--json"}, r.out)
	// The backup, into a home and bus of its own.
	args := []string{"restore", backup, "--json"}
	if r = mesh(t, t.TempDir(), args...); r.code != 0 {
		t.Fatalf("mesh %v: %+v", args, r)
	}
	matchGolden(t, "restore", args, r.out)
}
