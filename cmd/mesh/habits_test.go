package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshctl/mesh/cmd/mesh/cmdline"
	"github.com/meshctl/mesh/embedded/embeddedtest"
	"github.com/meshctl/mesh/wire"

	"github.com/alecthomas/kong"
)

// The command line people expect (issue 16): settings and labels that are
// never split, a version, the join string from a file, JSON logs, a
// status that watches, and a service that tells systemd it is ready.
func TestTheCommandLinePeopleExpect(t *testing.T) {
	t.Setenv("MESH_NATS_URL", "")
	dir := t.TempDir()
	// systemd's side of Type=notify: a datagram socket that hears READY=1.
	sock := filepath.Join(dir, "notify")
	l, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	t.Setenv("NOTIFY_SOCKET", sock)
	home := t.TempDir()
	up := start(t, "ready", "--home", home, "--log-format", "json", "up", "--listen", freeAddr(t))
	l.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 64)
	if n, _, err := l.ReadFromUnix(buf); err != nil || string(buf[:n]) != "READY=1" {
		t.Fatalf("systemd was told %q (%v), not READY=1", buf[:n], err)
	}
	t.Setenv("NOTIFY_SOCKET", "")
	first := strings.SplitN(up.log.String(), "\n", 2)[0]
	var line map[string]any
	if err := json.Unmarshal([]byte(first), &line); err != nil || line["time"] == nil || line["msg"] == nil {
		t.Fatalf("--log-format json wrote %q (%v)", first, err)
	}
	// In UTC, as every time mesh prints (the tests' zone is not UTC).
	if at, _ := line["time"].(string); !utcTime.MatchString(at) {
		t.Fatalf("--log-format json's time %q is not RFC 3339 in UTC", at)
	}

	// A ';' in a value is part of it: never a second setting or label.
	r := mustRun(t, home, "node", "enroll", "box", "--label", "note=a;b=c")
	doc := filepath.Join(dir, "m.json")
	if err := writeFile(doc, `{"module":"m","settings":{"opts":{"default":"x"}},"resources":[]}`); err != nil {
		t.Fatal(err)
	}
	mustRun(t, home, "module", "register", doc)
	mustRun(t, home, "assign", "box", "m", "--set", "opts=-Xmx1g;gc=g1")
	show := mustRun(t, home, "node", "show", "box").out
	if !strings.Contains(show, "note=a;b=c") || !strings.Contains(show, "opts=-Xmx1g;gc=g1") {
		t.Fatalf("a value with ';' was split:\n%s%s", r.out, show)
	}

	// The join string from a file, never on the command line.
	join := filepath.Join(dir, "join")
	if err := os.WriteFile(join, []byte(joinOf(t, home, "box")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	start(t, "following", "--home", t.TempDir(), "agent", "--join-file", join, "--root", filepath.Join(dir, "root"))
	mustRun(t, home, "push", "box", "--wait", "10s")

	for _, args := range [][]string{{"version"}, {"--version"}} {
		if r := mesh(t, home, args...); r.code != 0 || !strings.HasPrefix(r.out, "mesh ") || !strings.Contains(r.out, "commit") {
			t.Fatalf("mesh %v: %+v", args, r)
		}
	}
	// Completion: a script for each shell, and the answers it asks for.
	for _, sh := range []string{"bash", "zsh", "fish"} {
		if r := mesh(t, home, "completion", sh); r.code != 0 || !strings.Contains(r.out, "mesh") || !strings.Contains(r.out, "complete") {
			t.Fatalf("mesh completion %s: %+v", sh, r)
		}
	}
	t.Setenv("COMP_LINE", "mesh node s")
	if r := mesh(t, home); r.code != 0 || !strings.Contains(r.out, "show") || !strings.Contains(r.out, "set") {
		t.Fatalf("completing mesh node s: %+v", r)
	}
	os.Unsetenv("COMP_LINE") // t.Setenv puts back what was there when the test ends

	// A watch prints status again and again; Ctrl-C (here, a deadline)
	// ends it with exit 0.
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	var out bytes.Buffer
	if code := run(ctx, []string{"--home", home, "status", "--watch", "100ms"}, &out, io.Discard); code != 0 || strings.Count(out.String(), "--- ") < 2 {
		t.Fatalf("status --watch: exit %d\n%s", code, out.String())
	}
	// With --json, JSON lines: every line one whole answer.
	ctx, cancel = context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	out.Reset()
	if code := run(ctx, []string{"--home", home, "status", "--watch", "100ms", "--json"}, &out, io.Discard); code != 0 {
		t.Fatalf("status --watch --json: exit %d\n%s", code, out.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	for _, line := range lines {
		var s wire.StatusReport
		if err := json.Unmarshal([]byte(line), &s); err != nil || s.Nodes == nil {
			t.Fatalf("status --watch --json printed a line that is not one answer (%v): %q", err, line)
		}
	}
	if len(lines) < 2 {
		t.Fatalf("status --watch --json printed %d answer(s) in 1.5 s at 100ms", len(lines))
	}
}

// Selectors on push, status and node list, and push --dry-run, the
// mesh-wide plan that sends nothing (issue 16). Fails when a dry run
// writes to the log, or a selector lets another node through.
func TestSelectorsAndTheDryRun(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	up(t, home)
	mustRun(t, home, "node", "enroll", "a-1", "--label", "zone=eu-1")
	mustRun(t, home, "node", "enroll", "a-2", "--label", "zone=eu-2")
	doc := filepath.Join(t.TempDir(), "m.json")
	if err := writeFile(doc, `{"module":"motd","resources":[{"kind":"file","path":"/etc/motd","mode":"0644","content":"hi\n"}]}`); err != nil {
		t.Fatal(err)
	}
	mustRun(t, home, "module", "register", doc)
	mustRun(t, home, "assign", "--selector", "*", "motd")
	before := mustRun(t, home, "events").out
	r := mustRun(t, home, "push", "--dry-run")
	if !strings.Contains(r.out, "would send 2 of 2 node(s), 2 with changes; nothing was sent") || !strings.Contains(r.out, "added   /etc/motd") {
		t.Fatalf("push --dry-run:\n%s", r.out)
	}
	if after := mustRun(t, home, "events").out; after != before {
		t.Fatal("a dry run wrote to the log")
	}
	if r := mustRun(t, home, "push", "--selector", "zone=eu-1"); !strings.Contains(r.out, "sent a-1") || strings.Contains(r.out, "a-2") {
		t.Fatalf("push --selector zone=eu-1:\n%s", r.out)
	}
	if r := mustRun(t, home, "push", "--dry-run", "--behind"); !strings.Contains(r.out, "would send a-2") || !strings.Contains(r.out, "would send 2 of 2") {
		t.Fatalf("push --dry-run --behind (a-1 waits on an agent it does not have):\n%s", r.out)
	}
	if r := mesh(t, home, "status", "--selector", "zone=eu-2"); strings.Contains(r.out, "a-1") || !strings.Contains(r.out, "a-2") {
		t.Fatalf("status --selector zone=eu-2:\n%s", r.out)
	}
	if r := mustRun(t, home, "node", "list", "--selector", "zone=eu-1"); !strings.Contains(r.out, "a-1") || strings.Contains(r.out, "a-2") {
		t.Fatalf("node list --selector zone=eu-1:\n%s", r.out)
	}
}

// Every command's help shows an example (issue 16): a command added
// without one fails here.
func TestEveryCommandHasAnExample(t *testing.T) {
	var cli CLI
	parser, err := newParser(context.Background(), &cli, &cmdline.Output{Out: io.Discard, Err: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	var walk func(n *kong.Node, path []string)
	walk = func(n *kong.Node, path []string) {
		for _, c := range n.Children {
			p := append(append([]string{}, path...), c.Name)
			if len(c.Children) > 0 {
				walk(c, p)
				continue
			}
			r := mesh(t, t.TempDir(), append(p, "--help")...)
			if !strings.Contains(r.out, "Examples:") {
				t.Errorf("mesh %s --help shows no example", strings.Join(p, " "))
			}
		}
	}
	walk(parser.Model.Node, nil)
}

// The plan of a whole rollout (issue 17, part 4): every wave, its nodes,
// and what would change on each, with nothing sent; * takes the nodes no
// earlier wave chose; a wave that chooses nothing is refused.
func TestTheRolloutPlanShowsEveryWave(t *testing.T) {
	// Beside the others: no bus from the environment (TestMain unsets it).
	t.Parallel()
	home := t.TempDir()
	up(t, home)
	for _, n := range []string{"w-1", "w-2", "w-3", "w-4"} {
		zone := "eu-1"
		if n == "w-4" {
			zone = "eu-2"
		}
		mustRun(t, home, "node", "enroll", n, "--label", "zone="+zone)
	}
	doc := filepath.Join(t.TempDir(), "m.json")
	write := func(content string) {
		if err := writeFile(doc, `{"module":"motd","resources":[{"kind":"file","path":"/etc/motd","mode":"0644","content":"`+content+`\n"}]}`); err != nil {
			t.Fatal(err)
		}
		mustRun(t, home, "module", "register", doc)
	}
	write("one")
	mustRun(t, home, "assign", "--selector", "*", "motd")
	if r := mustRun(t, home, "assign", "w-3", "motd", "--policy", "pinned"); !strings.Contains(r.out, "policy pinned") {
		t.Fatalf("assign --policy: %s", r.out)
	}
	if r := mesh(t, home, "assign", "w-3", "motd", "--policy", "sometimes"); r.code != 2 || !strings.Contains(r.err, "pinned, manual or auto") {
		t.Fatalf("an unknown policy: %+v", r)
	}
	mustRun(t, home, "push")
	write("two")
	if r := mustRun(t, home, "node", "show", "w-3"); !strings.Contains(r.out, "policy pinned (the catalogue's latest is") {
		t.Fatalf("node show names no policy:\n%s", r.out)
	}
	before := mustRun(t, home, "events").out
	r := mustRun(t, home, "rollout", "plan", "motd", "--wave", "canary=name=w-1", "--wave", "half=zone=eu-1", "--wave", "rest=*")
	for _, want := range []string{"wave 1 canary (name=w-1): 1 node(s)", "w-1: 1 change(s)", "changed /etc/motd (motd): content",
		"wave 2 half (zone=eu-1): 1 node(s)", "wave 3 rest (*): 1 node(s)", "w-4: 1 change(s)", "held by its policy (pinned), in no wave: w-3"} {
		if !strings.Contains(r.out, want) {
			t.Fatalf("rollout plan lacks %q:\n%s", want, r.out)
		}
	}
	if after := mustRun(t, home, "events").out; after != before {
		t.Fatal("a rollout plan wrote to the log")
	}
	if r := mesh(t, home, "rollout", "plan", "motd", "--wave", "all=*", "--wave", "more=zone=eu-1"); r.code != 2 || !strings.Contains(r.err, "wave more (zone=eu-1) chooses no node") {
		t.Fatalf("a wave that chooses nothing: %+v", r)
	}
	// Started, it waits for the canary (there is no agent to apply).
	r = mustRun(t, home, "rollout", "start", "motd", "--wave", "canary=name=w-1", "--wave", "rest=*")
	id := strings.Fields(r.out)[2]
	embeddedtest.Eventually(t, "the controller to start the canary", func() bool {
		r = mustRun(t, home, "rollout", "show", id)
		return strings.Contains(r.out, "under way")
	})
	for _, want := range []string{"wave 1 canary (name=w-1), under way:", "the next wave waits: 1 node(s) of wave 1 have not applied the build",
		"w-2  waiting; to change: 1 resource(s)"} {
		if !strings.Contains(r.out, want) {
			t.Fatalf("rollout show lacks %q:\n%s", want, r.out)
		}
	}
}

// rollout wait ends as the rollout does, and says so in its exit: a
// rollout still running when the wait ends is not done (1), one aborted is
// not done (1), and an id that names none is refused in one line. Fails
// when a wait exits 0 on a rollout that did not finish.
func TestRolloutWaitEndsAsTheRolloutDoes(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	up(t, home)
	mustRun(t, home, "node", "enroll", "w-1")
	doc := filepath.Join(t.TempDir(), "m.json")
	for _, content := range []string{"one", "two"} {
		if err := writeFile(doc, `{"module":"motd","resources":[{"kind":"file","path":"/etc/motd","mode":"0644","content":"`+content+`\n"}]}`); err != nil {
			t.Fatal(err)
		}
		mustRun(t, home, "module", "register", doc)
		if content == "one" {
			mustRun(t, home, "assign", "w-1", "motd")
		}
	}
	var started wire.Rollout
	if err := json.Unmarshal([]byte(mustRun(t, home, "rollout", "start", "motd", "--wave", "all=*", "--json").out), &started); err != nil {
		t.Fatal(err)
	}
	// No agent applies it: the wave waits, and so does the rollout.
	if r := mesh(t, home, "rollout", "wait", started.ID, "--for", "300ms"); r.code != 1 || !strings.Contains(r.err, "still running") || !strings.Contains(r.out, started.ID) {
		t.Fatalf("waiting on a rollout that runs on: %+v", r)
	}
	mustRun(t, home, "rollout", "abort", started.ID)
	if r := mesh(t, home, "rollout", "wait", started.ID); r.code != 1 || !strings.Contains(r.err, "aborted") {
		t.Fatalf("waiting on an aborted rollout: %+v", r)
	}
	if r := mesh(t, home, "rollout", "wait", "r-0000000000"); r.code == 0 || r.err == "" || strings.Count(strings.TrimSpace(r.err), "\n") != 0 {
		t.Fatalf("waiting on no rollout: %+v", r)
	}
}
