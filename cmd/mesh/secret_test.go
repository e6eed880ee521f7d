package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Issue 14's acceptance, as an operator runs it: the secrets part of the
// README's walkthrough with two real agents (a secret given from a file, a
// minted credential, a rotation, a forgetting, a new value), then every
// command's output, a backup and the bus's own files are scanned for each
// secret value: none holds one, and the agents' files hold them all.
func TestNoSecretOutsideTheFilesOfItsNodes(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	up(t, home)
	var outputs []string
	run := func(args ...string) string {
		t.Helper()
		r := mustRun(t, home, args...)
		outputs = append(outputs, r.out, r.err)
		return r.out
	}
	dir := t.TempDir()
	pwFile := filepath.Join(dir, "pw")
	secrets := []string{"first-s3cret-value", "second-s3cret-value"}
	roots := providerAndConsumer(t, home, dir, func(args ...string) { run(args...) })
	if err := writeFile(pwFile, secrets[0]+"\n"); err != nil {
		t.Fatal(err)
	}
	run("assign", "db-1", "postgres", "--set-file", "password="+pwFile)
	run("assign", "app-1", "app")
	run("plan", "app-1")
	run("push")
	run("push", "db-1", "--wait", "10s")
	run("push", "app-1", "--wait", "10s")
	minted := func() string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(roots["app-1"], "etc/app/database.secret"))
		if err != nil {
			t.Fatal(err)
		}
		_, pw, _ := strings.Cut(string(b), "password = ")
		return strings.TrimSpace(pw)
	}
	secrets = append(secrets, minted())
	if out := run("rotate", "postgres", "--consumer", "app", "--wait", "10s"); !strings.Contains(out, "both ends apply generation 1") ||
		!strings.Contains(out, "the controller dropped the old credential (applied, event ") || !strings.Contains(out, "db-1 applied sequence 4, without the old credential") {
		t.Fatalf("rotate: %s", out)
	}
	// The drop is the controller's own act, where the operator looks.
	if ev := run("events"); !strings.Contains(ev, "RotationCompleted") || !strings.Contains(ev, `"reason":"applied"`) {
		t.Fatalf("events after the overlap ended:\n%s", ev)
	}
	if h := run("history", "db-1"); !strings.Contains(h, "rotation completed") {
		t.Fatalf("db-1's history after the overlap ended:\n%s", h)
	}
	if st := run("status"); !strings.Contains(st, "to generation 1: completed ") || !strings.Contains(st, "(applied), the old dropped") {
		t.Fatalf("status after the overlap ended:\n%s", st)
	}
	secrets = append(secrets, minted())
	run("secret", "forget", "db-1", "postgres", "password")
	if err := writeFile(pwFile, secrets[1]+"\n"); err != nil {
		t.Fatal(err)
	}
	run("assign", "db-1", "postgres", "--set-file", "password="+pwFile)
	run("push", "db-1", "--wait", "10s")
	for _, args := range [][]string{{"status"}, {"status", "--json"}, {"node", "show", "db-1"}, {"node", "show", "app-1"},
		{"node", "list", "--json"}, {"plan", "db-1"}, {"plan", "app-1"}, {"events"}, {"events", "--json"},
		{"history", "db-1", "--diff"}, {"history", "app-1", "--diff"}, {"audit"}, {"module", "show", "postgres"}} {
		run(args...)
	}
	backup := filepath.Join(dir, "backup")
	run("backup", backup)

	users, err := os.ReadFile(filepath.Join(roots["db-1"], "etc/postgres/users.conf"))
	if err != nil || !strings.Contains(string(users), "postgres "+secrets[1]) || !strings.Contains(string(users), secrets[3]) {
		t.Fatalf("db-1's users.conf lacks its secrets: %q %v", users, err)
	}
	if secrets[2] == secrets[3] || len(secrets[3]) != 32 {
		t.Fatalf("the rotation did not change app-1's password: %q then %q", secrets[2], secrets[3])
	}
	for _, s := range secrets {
		for i, out := range outputs {
			if strings.Contains(out, s) {
				t.Fatalf("output %d of the walkthrough holds a secret:\n%s", i, out)
			}
		}
		for _, where := range []string{backup, filepath.Join(home, "nats"), filepath.Join(home, "projections")} {
			if onDisk(t, where, []byte(s)) {
				t.Fatalf("a file under %s holds a secret", where)
			}
		}
	}
}

// onDisk says whether any file under dir holds b.
func onDisk(t *testing.T, dir string, b []byte) bool {
	t.Helper()
	var found bool
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			data, _ := os.ReadFile(p) // a file the server removed meanwhile reads empty
			found = found || strings.Contains(string(data), string(b))
		}
		return nil
	})
	return found
}
