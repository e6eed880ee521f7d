package main

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/meshctl/mesh/embedded/embeddedtest"
)

// talking is a mesh up with box's agent running talk, a program that
// writes a line to stdout, then (once that is in its log on disk) one to
// stderr, then copies to stdout what the test writes to the fifo it
// answers with. Its log is then, whatever the load: "hello" on stdout,
// "oops" on stderr.
func talking(t *testing.T) (home, fifo string) {
	t.Helper()
	home = t.TempDir()
	up(t, home)
	fifo = filepath.Join(t.TempDir(), "say")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(t.TempDir(), "root")
	mustRun(t, home, "node", "enroll", "box")
	start(t, "following", "--home", t.TempDir(), "agent", "--join", joinOf(t, home, "box"), "--root", root)
	script := `echo hello; until grep -q hello "$MESH_ROOT.state/logs/talk.log" 2>/dev/null; do sleep 0.01; done; echo oops >&2; exec cat ` + fifo
	doc := filepath.Join(t.TempDir(), "talk.json")
	if err := writeFile(doc, `{"module":"talk","run":{"command":"/bin/sh","args":["-c",`+strconv.Quote(script)+`]}}`); err != nil {
		t.Fatal(err)
	}
	mustRun(t, home, "module", "register", doc)
	mustRun(t, home, "assign", "box", "talk")
	mustRun(t, home, "push", "box", "--wait", "10s")
	embeddedtest.Eventually(t, "talk's two lines", func() bool {
		return strings.Contains(mesh(t, home, "logs", "box", "talk").out, "oops")
	})
	return home, fifo
}

// logLine is how mesh logs prints a line for a person.
var logLine = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z (stdout|stderr|agent ) (.*)$`)

// mesh logs as an operator runs it: both streams in order, each line with
// its time and stream; --lines; the refusals, each with its exit code; and
// --json against its golden file. Fails when a stream is missing or out
// of order, when a node that is not there or a module it does not run
// exits 0, or when the JSON's shape changes.
func TestJSONOutputsMatchTheirGoldenFilesForLogs(t *testing.T) {
	t.Parallel()
	home, _ := talking(t)
	r := mustRun(t, home, "logs", "box", "talk")
	var got []string
	for _, l := range strings.Split(strings.TrimSpace(r.out), "\n") {
		m := logLine.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("not a log line: %q in\n%s", l, r.out)
		}
		got = append(got, strings.TrimSpace(m[1])+" "+m[2])
	}
	if strings.Join(got, "\n") != "stdout hello\nstderr oops" {
		t.Fatalf("mesh logs box talk:\n%s", r.out)
	}
	if r := mustRun(t, home, "logs", "box", "talk", "--lines", "1"); !strings.HasSuffix(r.out, "stderr oops\n") || strings.Count(r.out, "\n") != 1 {
		t.Fatalf("mesh logs --lines 1:\n%s", r.out)
	}

	r = mustRun(t, home, "logs", "box", "talk", "--json")
	matchGolden(t, "logs", []string{"logs", "box", "talk", "--json"}, r.out)

	mustRun(t, home, "node", "enroll", "away")
	for _, c := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"logs", "box", "nothing"}, 1, "box runs no program of nothing"},
		{[]string{"logs", "away", "talk"}, 3, "no agent of away is on the bus"},
		{[]string{"logs", "Box", "talk"}, 2, `node name "Box" contains 'B'`},
		{[]string{"logs", "box", "talk", "--lines=-1"}, 2, "--lines -1 is not a number of lines"},
	} {
		r := mesh(t, home, c.args...)
		if r.code != c.code || r.out != "" || !strings.Contains(r.err, c.says) || strings.Count(r.err, "\n") != 1 {
			t.Errorf("mesh %v: exit %d, want %d saying %q in one line on stderr\nstdout: %s\nstderr: %s", c.args, r.code, c.code, c.says, r.out, r.err)
		}
	}
}

// --follow prints what the log holds, then each line the program writes
// after it started, until Ctrl-C, which ends it with exit 0. Fails when a
// follow stops at what was there, misses the new line, or ends in an error.
func TestMeshLogsFollowsUntilCtrlC(t *testing.T) {
	t.Parallel()
	home, fifo := talking(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errs embeddedtest.LockedBuffer
	done := make(chan int, 1)
	go func() { done <- run(ctx, []string{"--home", home, "logs", "box", "talk", "--follow"}, &out, &errs) }()
	embeddedtest.Eventually(t, "the lines there before", func() bool { return strings.Contains(out.String(), "oops") })
	f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("a line after the follow began\n"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	embeddedtest.Eventually(t, "the line written after", func() bool {
		return strings.Contains(out.String(), "stdout a line after the follow began")
	})
	cancel() // Ctrl-C
	if code := <-done; code != 0 || errs.String() != "" {
		t.Fatalf("mesh logs --follow on Ctrl-C: exit %d, stderr %q", code, errs.String())
	}
}
