package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// The README's "Scripting" as a test (issue 31's done-when): the walk
// through's commands, each with --json, on a real mesh up and real agents
// started as the README starts them, then the listings and the writes the
// walk through does not reach; every answer is parsed by one rule per kind
// (oneRule). It fails when any command prints a bare array, a time in
// another form than RFC 3339 in UTC, a second name for a number, or
// anything that is not one JSON object.
func TestEveryJSONAnswerFollowsTheOneRule(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	up(t, home)
	w := newWalk(t)
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	answers := 0
	check := func(line string, args []string, r result, stream bool) {
		t.Helper()
		// 1 is an answer too (status not well, a push that skipped a
		// node); 2 and 3 are not: the command was not understood, or
		// nothing answered.
		if r.code > 1 {
			t.Fatalf("%s: exit %d\n%s%s", line, r.code, r.out, r.err)
		}
		if r.code == 1 && r.out == "" && r.err != "" {
			return // a refusal (a viewer's assign): its one sentence is on stderr, and stdout holds nothing to parse
		}
		for _, v := range oneRule(r.out, stream) {
			t.Errorf("%s: %s\n%s", line, v, r.out)
		}
		answers++
	}
	for _, line := range walkthrough(string(readme)) {
		cmdline, _, _ := strings.Cut(line, "   #")
		cmdline = strings.TrimSpace(cmdline)
		if strings.HasSuffix(cmdline, " &") || cmdline == "wait" {
			continue // a watch in a terminal of its own: JSON lines, checked by its own test
		}
		// a && b: each in turn, while each exits 0, as a shell does.
		for _, cmdline := range strings.Split(cmdline, " && ") {
			stdin := ""
			if before, after, ok := strings.Cut(cmdline, " | ./mesh "); ok && strings.HasPrefix(before, "echo ") {
				stdin, cmdline = strings.TrimPrefix(before, "echo ")+"\n", "./mesh "+after
			}
			switch {
			case strings.HasPrefix(cmdline, "cat "):
				continue
			case strings.HasPrefix(cmdline, "go build"):
				w.goBuild(t, cmdline)
				continue
			case strings.HasPrefix(cmdline, "./mesh agent "):
				m := agentLine.FindStringSubmatch(cmdline)
				if m == nil {
					t.Fatalf("%s: not an agent line this test can start", line)
				}
				start(t, "following", "--home", t.TempDir(), "agent", "--join", joinOf(t, home, m[1]), "--root", filepath.Join(w.work, m[2]))
				continue
			}
			args := append(w.command(t, line, cmdline), "--json")
			r := meshWithStdin(t, home, stdin, args...)
			check(line, args, r, false)
			settle(t, home, w.runs)
			if r.code != 0 {
				break
			}
		}
	}
	if answers < 20 {
		t.Fatalf("only %d of the walk through's commands were run: has the README's walk through moved?", answers)
	}
	// What the walk through does not run: every listing, and the writes
	// a script follows up, on the same mesh.
	mustRun(t, home, "module", "register", "../../examples/builder.json")
	mustRun(t, home, "assign", "app-2", "builder")
	rest := [][]string{
		{"node", "list"}, {"node", "show", "db-1"}, {"module", "list"}, {"module", "show", "postgres"},
		{"history", "app-1"}, {"audit"}, {"audit", "app-1"}, {"foreign", "list"}, {"token", "list"},
		{"seat", "list"}, {"seat", "show", "builder"}, {"rollout", "list"}, {"projections", "status"},
		{"plan", "app-1"}, {"push", "--dry-run"}, {"rollout", "plan", "app", "--wave", "all=*"},
		{"network", "set", "10.42.0.0/16"}, {"network", "show"}, {"network", "address", "db-2", "10.42.0.99"},
		{"token", "create"}, {"node", "set", "app-2", "--label", "tier=web"},
		{"seat", "handover", "builder", "--to", "db-2"},
		{"status", "--as-of", "1s"}, {"projections", "verify"}, {"assign", "--selector", "zone=us-1", "app"},
		{"backup", filepath.Join(t.TempDir(), "backup")},
	}
	for _, args := range rest {
		args = append(args, "--json")
		check("mesh "+strings.Join(args, " "), args, mesh(t, home, args...), false)
	}
	t.Logf("%d answers held to the rule", answers+1)
	// The log streams: JSON lines, each line one object by the same rule.
	check("mesh events --json", []string{"events", "--json"}, mesh(t, home, "events", "--json"), true)
}

// oneRule is what the README's "Scripting" promises of a --json answer, as
// the sentences that say where it is broken (none when it holds). A
// stream is JSON lines: each line one object.
func oneRule(out string, stream bool) []string {
	var bad []string
	lines := []string{out}
	if stream {
		lines = strings.Split(strings.TrimRight(out, "\n"), "\n")
	}
	for _, l := range lines {
		dec := json.NewDecoder(strings.NewReader(l))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			return append(bad, fmt.Sprintf("not JSON: %v", err))
		}
		if dec.More() {
			return append(bad, "more than one JSON value: one answer is one object")
		}
		if _, ok := v.(map[string]any); !ok {
			return append(bad, fmt.Sprintf("the answer is a %T, not an object: a list sits under a named key", v))
		}
		bad = append(bad, ruleOf(v, "", "")...)
	}
	return bad
}

var (
	// utcTime is the one form of a time: RFC 3339, in UTC.
	utcTime = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$`)
	// anyTime finds a time written any way, so that one in a sentence in
	// another form is found too.
	anyTime = regexp.MustCompile(`\d{4}-\d\d-\d\d[T ]\d\d:\d\d(:\d\d)?(\.\d+)?(Z|[+-]\d\d:?\d\d| ?UTC)?`)
	// timeKey names a field that holds a time.
	timeKey = regexp.MustCompile(`^(at|since|until|expires|created|stored|released|as_of|last_heard|time|.+_(at|since|until|time))$`)
	// numberKey is every name a sequence may have: seq (seqs) for a stream
	// sequence and sequence for a declaration's, each maybe with whose it
	// is before it (enrolled_seq, last_sequence).
	numberKey = regexp.MustCompile(`^([a-z]+_)*(seqs?|sequence)$`)
	// secondNames are the names that would say again what seq or sequence
	// already says: a script would have to guess which it holds.
	secondNames = regexp.MustCompile(`(^|_)(stream_seq|stream_sequence|declaration_seq|declaration_sequence|seq_?no|seq_?num(ber)?|sequence_?num(ber)?)($|_)`)
)

// ruleOf checks one value of an answer: key is its field's name ("" in a
// list), parent what holds it.
func ruleOf(v any, key, path string) []string {
	var bad []string
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			p := path + "." + k
			if strings.Contains(k, "seq") && (!numberKey.MatchString(k) || secondNames.MatchString(k)) {
				bad = append(bad, fmt.Sprintf("%s: a second name for a number (seq is a stream sequence, sequence a declaration's)", p))
			}
			bad = append(bad, ruleOf(e, k, p)...)
		}
	case []any:
		for i, e := range x {
			if _, list := e.([]any); list {
				bad = append(bad, fmt.Sprintf("%s[%d]: a list in a list: a list sits under a named key", path, i))
			}
			bad = append(bad, ruleOf(e, key, fmt.Sprintf("%s[%d]", path, i))...)
		}
	case string:
		if timeKey.MatchString(key) {
			if !utcTime.MatchString(x) {
				bad = append(bad, fmt.Sprintf("%s: %q is not an RFC 3339 time in UTC", path, x))
			}
			break
		}
		for _, t := range anyTime.FindAllString(x, -1) {
			if !utcTime.MatchString(t) {
				bad = append(bad, fmt.Sprintf("%s: %q is a time in another form than RFC 3339 in UTC", path, t))
			} else if _, err := time.Parse(time.RFC3339, t); err != nil {
				bad = append(bad, fmt.Sprintf("%s: %q does not parse as RFC 3339: %v", path, t, err))
			}
		}
	case json.Number:
		if timeKey.MatchString(key) {
			bad = append(bad, fmt.Sprintf("%s: a time as a number (%s): times are RFC 3339 strings", path, x))
		}
	}
	return bad
}

// The rule itself fails where it must: each of these answers breaks it
// once, and the last keeps it.
func TestTheOneRuleFindsWhatBreaksIt(t *testing.T) {
	for _, c := range []struct {
		out    string
		stream bool
		breaks bool
	}{
		{`[{"name":"web-1"}]`, false, true},
		{`{"nodes":[[1]]}`, false, true},
		{`{"at":"2026-12-04 21:05"}`, false, true},
		{`{"since":"2026-12-04T21:05:00+01:00"}`, false, true},
		{`{"detail":"failing since 2026-12-04 21:05:07: down"}`, false, true},
		{`{"since":1764882300}`, false, true},
		{`{"sent":[{"stream_seq":6}]}`, false, true},
		{`{"sequence_number":2}`, false, true},
		{`{"a":1}{"b":2}`, false, true},
		{`{"a":1}` + "\n" + `[2]`, true, true},
		{`{"nodes":[],"seq":1,"enrolled_seq":2,"sequence":3,"at":"2026-12-04T21:05:00Z","detail":"sent 2026-12-04T21:05:00Z"}`, false, false},
	} {
		if got := oneRule(c.out, c.stream); (len(got) > 0) != c.breaks {
			t.Errorf("%s: the rule says %q", c.out, got)
		}
	}
}
