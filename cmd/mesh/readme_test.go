package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/meshctl/mesh/embedded/embeddedtest"
	"github.com/meshctl/mesh/wire"
)

var updateTranscript = flag.Bool("update-transcript", false, "write testdata/readme.transcript from this run")

// The README's walkthrough as a transcript (issue 19): the commands are read
// from README.md itself, run in order against a real mesh up and real agents
// as the README says to start them, and each one's output (what varies
// between runs masked) is compared with testdata/readme.transcript. A
// command added to, dropped from or changed in the README, or a command
// whose output changed, fails here until the transcript is written again
// (go test ./cmd/mesh -run TestTheREADMEWalkthrough -update-transcript)
// and the change is read in review. The run stops at the README's first
// line this test cannot run (the nats CLI).
func TestTheREADMEWalkthrough(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	up(t, home)
	w := newWalk(t)
	work := w.work
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var transcript bytes.Buffer
	var bg *background
	for _, line := range walkthrough(string(readme)) {
		cmdline, _, _ := strings.Cut(line, "   #")
		cmdline = strings.TrimSpace(cmdline)
		fmt.Fprintf(&transcript, "$ %s\n", line)
		if bare, ok := strings.CutSuffix(cmdline, " &"); ok {
			// In a terminal of its own: here, in the background, until a
			// later line waits for it to end.
			bg = startBackground(t, home, w.command(t, line, bare))
			transcript.WriteString("(in the background)\n")
			continue
		}
		if strings.HasPrefix(cmdline, "go build") {
			w.goBuild(t, cmdline)
			transcript.WriteString("(built mesh-greeter)\n")
			continue
		}
		if cmdline == "wait" {
			code, errs := bg.wait(t)
			fmt.Fprintf(&transcript, "stderr: %sexit %d\n", removedKey(t, errs), code)
			continue
		}
		// a && b: each in turn, while each exits 0, as a shell does.
		for _, cmdline := range strings.Split(cmdline, " && ") {
			if !runReadmeLine(t, home, w, line, cmdline, &transcript) {
				break
			}
		}
	}
	// Where the walk through's files and home are, as the README names them.
	got := mask(w.asInREADME(strings.NewReplacer(work+"/", "", home, ".mesh").Replace(transcript.String())))
	path := filepath.Join("testdata", "readme.transcript")
	if *updateTranscript {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (write it with -update-transcript)", err)
	}
	if got != string(want) {
		// The log says what happened where the output does not (a
		// program that could not start, a report more): a run that
		// differs once in tens is read from it.
		ev := mesh(t, home, "events")
		t.Logf("the event log at the end of the walk through (mesh events exited %d%s):\n%s", ev.code, strings.TrimRight(": "+ev.err, ": \n"), ev.out)
		t.Fatalf("the README's walkthrough no longer gives %s (-update-transcript writes it; read the diff):\n%s", path, lineDiff(string(want), got))
	}
}

// runReadmeLine runs one command of a README line into the transcript,
// and answers whether it exited 0.
func runReadmeLine(t *testing.T, home string, w *walk, line, cmdline string, transcript *bytes.Buffer) bool {
	t.Helper()
	{
		stdin := ""
		if before, after, ok := strings.Cut(cmdline, " | ./mesh "); ok && strings.HasPrefix(before, "echo ") {
			stdin, cmdline = strings.TrimPrefix(before, "echo ")+"\n", "./mesh "+after
		}
		switch {
		case strings.HasPrefix(cmdline, "cat "):
			b, err := os.ReadFile(filepath.Join(w.work, strings.TrimPrefix(cmdline, "cat ")))
			if err != nil {
				t.Fatalf("%s: %v\n%s", line, err, transcript.String())
			}
			transcript.Write(b)
			return true
		case strings.HasPrefix(cmdline, "./mesh agent "):
			// In a terminal of its own: here, in the background, with the
			// join string mesh node join prints and its root under work.
			m := agentLine.FindStringSubmatch(cmdline)
			if m == nil {
				t.Fatalf("%s: not an agent line this test can start", line)
			}
			node := m[1]
			start(t, "following", "--home", t.TempDir(), "agent", "--join", joinOf(t, home, node), "--root", filepath.Join(w.work, m[2]))
			fmt.Fprintf(transcript, "(%s's agent follows its declarations)\n", node)
			return true
		}
		args := w.command(t, line, cmdline)
		r := meshWithStdin(t, home, stdin, args...)
		transcript.WriteString(r.out)
		if r.err != "" {
			fmt.Fprintf(transcript, "stderr: %s", r.err)
		}
		fmt.Fprintf(transcript, "exit %d\n", r.code)
		settle(t, home, w.runs)
		return r.code == 0
	}
}

// agentLine is how the README starts an agent: a join string it cannot
// know, and a root.
var agentLine = regexp.MustCompile(`^\./mesh agent --join <([a-z0-9-]+)'s join string> --root (\S+)$`)

// walkthrough is the README's command lines from its walk through, in
// order, up to the first this test cannot run.
func walkthrough(readme string) []string {
	_, section, _ := strings.Cut(readme, "## A walk through")
	section, _, _ = strings.Cut(section, "\n## ")
	var out []string
	for _, l := range strings.Split(section, "\n") {
		if !strings.HasPrefix(l, "    ") {
			continue
		}
		l = strings.TrimSpace(l)
		switch {
		case strings.HasPrefix(l, "go build") && !strings.Contains(l, "./examples/mesh-greeter"):
			// The mesh itself: this test runs the one it is built into.
		case strings.HasPrefix(l, "./mesh "), strings.HasPrefix(l, "go build "), strings.HasPrefix(l, "cat ./roots/"), l == "wait" || strings.HasPrefix(l, "wait "), strings.HasPrefix(l, "echo ") && strings.Contains(l, " | ./mesh "):
			out = append(out, l)
		default:
			return out
		}
	}
	return out
}

// readmeArgs splits a README command line as a shell would (quotes and all),
// without its "./mesh".
func readmeArgs(line string) []string {
	var args []string
	var cur strings.Builder
	quote, in := rune(0), false
	for _, r := range line {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(r)
		case r == '"' || r == '\'':
			quote, in = r, true
		case r == ' ':
			if in || cur.Len() > 0 {
				args = append(args, cur.String())
			}
			cur.Reset()
			in = false
		default:
			cur.WriteRune(r)
			in = true
		}
	}
	if in || cur.Len() > 0 {
		args = append(args, cur.String())
	}
	return args[1:]
}

// meshWithStdin is mesh with standard input (echo X | ./mesh ...).
func meshWithStdin(t *testing.T, home, stdin string, args ...string) result {
	t.Helper()
	if stdin == "" {
		return mesh(t, home, args...)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	w.WriteString(stdin)
	w.Close()
	saved := os.Stdin
	os.Stdin = r
	defer func() { os.Stdin = saved; r.Close() }()
	return mesh(t, home, args...)
}

// settle waits until no node is waiting for its agent, every program of
// a module that runs (runs) on the current nodes it is assigned to has
// started and
// its check said healthy or unhealthy, and no rollout is running: an
// operator reads a command's answer slower than an agent applies, a
// program starts and a wave passes, and the next command's output should
// not depend on the race.
func settle(t *testing.T, home string, runs map[string]bool) {
	t.Helper()
	embeddedtest.Eventually(t, "the agents to report on what they were sent, their programs to start, and rollouts to end", func() bool {
		var s wire.StatusReport
		r := mesh(t, home, "status", "--json")
		if json.Unmarshal([]byte(r.out), &s) != nil {
			return false
		}
		current := map[string]bool{}
		for _, n := range s.Nodes {
			if n.State == wire.StateWaiting {
				return false
			}
			current[n.Name] = n.State == wire.StateCurrent
		}
		for _, ro := range s.Rollouts {
			if ro.State == wire.RolloutRunning {
				return false
			}
		}
		started := map[string]bool{}
		for _, rt := range s.Runtimes {
			if rt.Health == wire.HealthStarting {
				return false
			}
			started[rt.Module+"@"+rt.Node] = true
		}
		for module := range runs {
			var m wire.ModuleView
			if json.Unmarshal([]byte(mesh(t, home, "module", "show", module, "--json").out), &m) != nil {
				return false
			}
			for _, a := range m.AssignedTo {
				if current[a.Node] && !started[module+"@"+a.Node] {
					return false
				}
			}
		}
		return true
	})
}

// masks replace what differs between runs by its kind.
var masks = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z`), "<time>"},
	{regexp.MustCompile(`\d{4}-\d\d-\d\d \d\d:\d\d(:\d\d)?`), "<time>"},
	{regexp.MustCompile(`meshjoin1\.[A-Za-z0-9_\-]+`), "<join string>"},
	{regexp.MustCompile(`\b[0-9a-f]{12,64}\b`), "<digest>"},
	{regexp.MustCompile(`\b[A-Z2-7]{56}\b`), "<key>"},
	// An artifact's size: the greeter's, built by this toolchain.
	{regexp.MustCompile(`sha256 <digest>, \d+ bytes`), "sha256 <digest>, N bytes"},
	{regexp.MustCompile(`\d+(\.\d+)?(ms|µs|s)\b`), "<duration>"},
	{regexp.MustCompile(`\d+/s\b`), "<rate>"},
	{regexp.MustCompile(`(at sequence|event|events|at event|seq|\(sequence|version) \d+`), "$1 N"},
	{regexp.MustCompile(`(?m)^(facts|detected) .*$`), "$1 <what this machine's agent detected>"},
	{regexp.MustCompile(`(?m)^version(\s+)\d+$`), "version${1}N"},
	{regexp.MustCompile(`127\.0\.0\.1:\d+`), "127.0.0.1:<port>"},
	{regexp.MustCompile(`\br-[0-9a-f]{10}\b`), "r-<id>"},
	{regexp.MustCompile(`\bpid \d+`), "pid N"},
	// A removal ends the connections open at that moment: a watch's,
	// between its ticks, or none.
	{regexp.MustCompile(`\d+ live connection\(s\)`), "N live connection(s)"},
}

func mask(s string) string {
	for _, m := range masks {
		s = m.re.ReplaceAllString(s, m.with)
	}
	// Agents report in whichever order they apply: a run of such lines is
	// compared sorted.
	lines := strings.Split(s, "\n")
	for i := 0; i < len(lines); {
		j := i
		for j < len(lines) && appliedLine.MatchString(lines[j]) {
			j++
		}
		slices.Sort(lines[i:j])
		i = max(j, i+1)
	}
	return strings.Join(lines, "\n")
}

var appliedLine = regexp.MustCompile(`^\S+ applied sequence \d+`)

// lineDiff lists the lines that differ, with their numbers.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var out []string
	for i := range max(len(w), len(g)) {
		var a, b string
		if i < len(w) {
			a = w[i]
		}
		if i < len(g) {
			b = g[i]
		}
		if a != b {
			out = append(out, fmt.Sprintf("line %d\n  want %q\n  got  %q", i+1, a, b))
		}
		if len(out) == 20 {
			break
		}
	}
	return strings.Join(out, "\n")
}

// background is a command of the walk through running on its own (a
// line ending in "&"), until a later "wait" line.
type background struct {
	done chan int
	errs *embeddedtest.LockedBuffer
}

func startBackground(t *testing.T, home string, args []string) *background {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	b := &background{done: make(chan int, 1), errs: &embeddedtest.LockedBuffer{}}
	go func() { b.done <- run(ctx, append([]string{"--home", home}, args...), io.Discard, b.errs) }()
	t.Cleanup(cancel)
	return b
}

// wait is the background command's exit code and what it said on stderr,
// once it ended by itself.
func (b *background) wait(t *testing.T) (int, string) {
	t.Helper()
	if b == nil {
		t.Fatal("the README waits for a command it did not start in the background")
	}
	code := -1
	embeddedtest.Eventually(t, "the README's background command to end", func() bool {
		select {
		case code = <-b.done:
			return true
		default:
			return false
		}
	})
	return code, b.errs.String()
}

// removedKey is how the transcript says a removed operator's command was
// refused. The refusal comes one of two ways, by when the command next
// reached the bus after the removal: the bus refuses the key at connect
// (the callout), or the controller refuses the call of a key it no longer
// knows (a connection made just before). Both are the truth; either is
// accepted, and the transcript names the one way the README promises.
func removedKey(t *testing.T, stderr string) string {
	t.Helper()
	for _, said := range []string{"refused the operator key", "the key it came under is no operator's in this mesh"} {
		if strings.Contains(stderr, said) && strings.Contains(stderr, "removed") {
			return "mesh: (the removed operator's key refused, by the bus or by the controller)\n"
		}
	}
	if stderr == "" {
		return ""
	}
	t.Fatalf("a background command ended saying %q, not that its operator's key was refused", stderr)
	return ""
}
