package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meshctl/mesh/wire"
)

// fromTheLog is status --json without what only a running controller
// hears (when it last heard each agent): what a restore must give back.
func fromTheLog(t *testing.T, out string) string {
	t.Helper()
	var s wire.StatusReport
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatalf("status --json: %v\n%s", err, out)
	}
	for i := range s.Nodes {
		s.Nodes[i].LastHeard = nil
	}
	b, _ := json.MarshalIndent(s, "", "  ")
	return string(b)
}

// mustRun runs mesh and fails the test unless it exits 0.
func mustRun(t *testing.T, home string, args ...string) result {
	t.Helper()
	r := mesh(t, home, args...)
	if r.code != 0 {
		t.Fatalf("mesh %v: exit %d\n%s%s", args, r.code, r.out, r.err)
	}
	return r
}

func joinOf(t *testing.T, home, node string) string {
	t.Helper()
	r := mesh(t, home, "node", "join", node)
	if r.code != 0 {
		t.Fatalf("node join: %+v", r)
	}
	return strings.TrimSpace(r.out)
}

// Back up, stop everything, wipe the home, restore, start again: status is
// what it was, the read models verify, and restarted agents accept the next
// push. Then restore an older backup: the node's refusal lifts the sequence
// above its own and the push after converges.
func TestBackupRestore(t *testing.T) {
	// Beside the others: no bus from the environment (TestMain unsets it).
	t.Parallel()
	home := t.TempDir()
	agentDir := t.TempDir()
	listen := freeAddr(t)
	up := start(t, "ready", "--home", home, "up", "--listen", listen)
	must := func(home string, args ...string) result { t.Helper(); return mustRun(t, home, args...) }
	must(home, "node", "enroll", "web-1")
	agentArgs := []string{"--home", home, "agent", "--join", joinOf(t, home, "web-1"), "--root", filepath.Join(agentDir, "root")}
	agent := start(t, "following", agentArgs...)
	body := filepath.Join(t.TempDir(), "b.json")
	writeBody := func(content string) {
		t.Helper()
		if err := writeFile(body, `{"resources":[{"kind":"file","path":"/etc/motd","mode":"0644","content":"`+content+`\n"}]}`); err != nil {
			t.Fatal(err)
		}
	}
	writeBody("one")
	must(home, "declare", "web-1", body, "--wait", "10s")
	older := filepath.Join(t.TempDir(), "older")
	must(home, "backup", older)
	must(home, "push", "web-1", "--wait", "10s")
	before := fromTheLog(t, must(home, "status", "--json").out)
	full := filepath.Join(t.TempDir(), "full")
	r := must(home, "backup", full)
	if !strings.Contains(r.out, "secret key") {
		t.Fatalf("backup does not say it holds a secret: %s", r.out)
	}
	agent.stop()
	up.stop()

	fresh := t.TempDir()
	r = must(fresh, "restore", full)
	if !strings.Contains(r.out, "restored") {
		t.Fatalf("restore: %+v", r)
	}
	if r := mesh(t, fresh, "restore", full); r.code == 0 || !strings.Contains(r.err, "already holds") {
		t.Fatalf("a second restore over the restored stream: %+v", r)
	}
	up = start(t, "ready", "--home", fresh, "up", "--listen", listen)
	if !strings.Contains(up.log.String(), "folding them from the stream") {
		t.Fatalf("the start does not say it folded the read models:\n%s", up.log)
	}
	if after := fromTheLog(t, must(fresh, "status", "--json").out); after != before {
		t.Fatalf("status after restore differs:\nbefore %s\nafter  %s", before, after)
	}
	must(fresh, "projections", "verify")
	agentArgs[1] = fresh
	agent = start(t, "following", agentArgs...)
	writeBody("two")
	must(fresh, "declare", "web-1", body, "--wait", "10s")
	agent.stop()
	up.stop()

	// The older backup: its log ends before what web-1 has applied.
	old := t.TempDir()
	must(old, "restore", older)
	up = start(t, "ready", "--home", old, "up", "--listen", listen)
	agentArgs[1] = old
	agent = start(t, "following", agentArgs...)
	// The agent refuses the log's last declaration as soon as it reads it
	// (it applied higher); if the push comes before that refusal is folded,
	// its declaration is refused too, and the next one is numbered above.
	r = mesh(t, old, "push", "web-1", "--wait", "10s")
	if r.code == 1 && strings.Contains(r.err, "refused") {
		r = must(old, "push", "web-1", "--wait", "10s")
	}
	if !strings.Contains(r.out, "the highest sequence web-1 says it applied") || !strings.Contains(r.out, "applied sequence") {
		t.Fatalf("the push after the refusal: %+v", r)
	}
}

func writeFile(path, s string) error { return os.WriteFile(path, []byte(s), 0o644) }

// Rule 21 across a backup: a backup carries the salts of the secrets not
// forgotten, so a mesh restored from it composes them; one taken after a
// secret was forgotten does not, so the restored mesh cannot open it and
// says to set it again. Fails when backups leave the salts out (the first
// restore cannot compose db-1) or keep forgotten ones (the second can).
func TestBackupCarriesTheSaltsOfSecretsNotForgotten(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	listen := freeAddr(t)
	up := start(t, "ready", "--home", home, "up", "--listen", listen)
	must := func(home string, args ...string) result { t.Helper(); return mustRun(t, home, args...) }
	pw := filepath.Join(t.TempDir(), "pw")
	if err := writeFile(pw, "not-in-any-backup\n"); err != nil {
		t.Fatal(err)
	}
	must(home, "node", "enroll", "db-1", "-c", "linux")
	must(home, "module", "register", "../../examples/postgres.json")
	must(home, "assign", "db-1", "postgres", "--set-file", "password="+pw)
	kept := filepath.Join(t.TempDir(), "kept")
	if r := must(home, "backup", kept); !strings.Contains(r.out, "salts of 1 secret(s)") {
		t.Fatalf("backup: %s", r.out)
	}
	r := must(home, "secret", "forget", "db-1", "postgres", "password")
	if !strings.Contains(r.out, "forgot version(s) [1]") || !strings.Contains(r.out, "cannot be composed until it is set again") {
		t.Fatalf("secret forget: %s", r.out)
	}
	if r := must(home, "secret", "forget", "db-1", "postgres", "password"); !strings.Contains(r.out, "forgotten already, nothing to do") {
		t.Fatalf("secret forget again: %s", r.out)
	}
	forgot := filepath.Join(t.TempDir(), "forgot")
	if r := must(home, "backup", forgot); !strings.Contains(r.out, "salts of 0 secret(s)") {
		t.Fatalf("backup after forgetting: %s", r.out)
	}
	up.stop()
	for _, c := range []struct {
		backup, want string
	}{{kept, `"state": "never sent"`}, {forgot, "set it again"}} {
		fresh := t.TempDir()
		must(fresh, "restore", c.backup)
		up := start(t, "ready", "--home", fresh, "up", "--listen", listen)
		if out := mesh(t, fresh, "status", "--json").out; !strings.Contains(out, c.want) {
			t.Fatalf("restored from %s, status lacks %q:\n%s", filepath.Base(c.backup), c.want, out)
		}
		up.stop()
	}
	for _, dir := range []string{kept, forgot} {
		for _, f := range []string{"events.jsonl", "secrets.json", "manifest.json"} {
			b, err := os.ReadFile(filepath.Join(dir, f))
			if err != nil || strings.Contains(string(b), "not-in-any-backup") {
				t.Fatalf("%s/%s: %v, or it holds the secret in clear", filepath.Base(dir), f, err)
			}
		}
	}
}
