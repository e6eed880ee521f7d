package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Issue 31, point 2, the README's own order with real agents: --set
// port=6543, then later a new password by --set-file. The re-assign
// changes only the password, says so (the secret as its version), and
// port stays 6543 on db-1 and in app-1's config. Fails when a re-assign
// resets the settings it was not given (port back to 5432), or when its
// output does not name what changed.
func TestAReassignChangesOnlyTheSettingsGiven(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	up(t, home)
	dir := t.TempDir()
	pwFile := filepath.Join(dir, "pw")
	roots := providerAndConsumer(t, home, dir, func(args ...string) { mustRun(t, home, args...) })
	if err := writeFile(pwFile, "first-s3cret\n"); err != nil {
		t.Fatal(err)
	}
	mustRun(t, home, "assign", "db-1", "postgres", "--set-file", "password="+pwFile)
	mustRun(t, home, "assign", "app-1", "app")
	if out := mustRun(t, home, "assign", "db-1", "postgres", "--set", "port=6543").out; !strings.Contains(out, `port: (not set) -> "6543"`) ||
		strings.Contains(out, "password") {
		t.Fatalf("--set port=6543 does not say it set port, and only port:\n%s", out)
	}
	if err := writeFile(pwFile, "second-s3cret\n"); err != nil {
		t.Fatal(err)
	}
	out := mustRun(t, home, "assign", "db-1", "postgres", "--set-file", "password="+pwFile).out
	if !strings.Contains(out, "password: (secret, version 1) -> (secret, version 2)") || strings.Contains(out, "port") || strings.Contains(out, "s3cret") {
		t.Fatalf("a new password does not say it changed the password, and only that:\n%s", out)
	}
	// Bad input changes nothing: one sentence, exit 2 (a refusal of what was asked), no event appended.
	events := mustRun(t, home, "events").out
	if r := mesh(t, home, "assign", "db-1", "postgres", "--unset", "colour"); r.code != 2 || !strings.Contains(r.err, `no setting "colour" to unset`) {
		t.Fatalf("--unset of a setting postgres has not: exit %d\n%s", r.code, r.err)
	}
	if again := mustRun(t, home, "events").out; again != events {
		t.Fatalf("a refused assign appended:\n%s", strings.TrimPrefix(again, events))
	}
	mustRun(t, home, "push", "db-1", "--wait", "10s")
	mustRun(t, home, "push", "app-1", "--wait", "10s")
	for node, file := range map[string]string{"db-1": "etc/postgres/postgres.conf", "app-1": "etc/app/app.conf"} {
		b, err := os.ReadFile(filepath.Join(roots[node], file))
		if err != nil || !strings.Contains(string(b), "6543") {
			t.Fatalf("%s's %s does not hold port 6543 after the new password: %q %v", node, file, b, err)
		}
	}
	if b, err := os.ReadFile(filepath.Join(roots["db-1"], "etc/postgres/users.conf")); err != nil || !strings.Contains(string(b), "postgres second-s3cret") {
		t.Fatalf("db-1 does not hold the new password: %v", err)
	}
	// --unset takes port back to the manifest's default, and only port.
	if out := mustRun(t, home, "assign", "db-1", "postgres", "--unset", "port").out; !strings.Contains(out, `port: "6543" -> (not set)`) || strings.Contains(out, "password") {
		t.Fatalf("--unset port does not say it unset port, and only port:\n%s", out)
	}
	mustRun(t, home, "push", "db-1", "--wait", "10s")
	if b, err := os.ReadFile(filepath.Join(roots["db-1"], "etc/postgres/postgres.conf")); err != nil || !strings.Contains(string(b), "port = 5432") {
		t.Fatalf("after --unset port db-1 is not on the default port: %q %v", b, err)
	}
	// --reset drops what is not given again; the password is required.
	if r := mesh(t, home, "assign", "db-1", "postgres", "--reset"); r.code != 2 || !strings.Contains(r.err, "setting password is required") {
		t.Fatalf("--reset without the required password: exit %d\n%s", r.code, r.err)
	}
}

// providerAndConsumer is the README's start with real agents: db-1 and
// app-1 enrolled, each an agent following with its root under dir, and
// postgres and app registered. It answers each node's root.
func providerAndConsumer(t *testing.T, home, dir string, run func(args ...string)) map[string]string {
	t.Helper()
	roots := map[string]string{}
	for _, n := range []string{"db-1", "app-1"} {
		run("node", "enroll", n, "--capability", "linux")
		roots[n] = filepath.Join(dir, n)
		start(t, "following", "--home", t.TempDir(), "agent", "--join", joinOf(t, home, n), "--root", roots[n])
	}
	run("module", "register", "../../examples/postgres.json")
	run("module", "register", "../../examples/app.json")
	return roots
}
