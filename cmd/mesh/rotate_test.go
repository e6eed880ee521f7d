package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// A rotation's stage as an operator and a script see it: rotate says
// until when the provider accepts the old credential too, status names the
// overlap and the consumer end it waits on, and status --json carries it
// (golden file status-rotation). The agents never run, so the overlap
// stays open. A negative --overlap is refused in one sentence, exit 2, and
// records nothing. Fails when the overlap is not opened, not shown, or
// its fields change.
func TestRotateSaysItsOverlapAndStatusItsStage(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	up(t, home)
	for _, n := range []string{"db-1", "app-1"} {
		mustRun(t, home, "node", "enroll", n, "--capability", "linux")
	}
	mustRun(t, home, "module", "register", "../../examples/postgres.json")
	mustRun(t, home, "module", "register", "../../examples/app.json")
	pw := filepath.Join(t.TempDir(), "pw")
	if err := writeFile(pw, "s3cret\n"); err != nil {
		t.Fatal(err)
	}
	mustRun(t, home, "assign", "db-1", "postgres", "--set-file", "password="+pw)
	mustRun(t, home, "assign", "app-1", "app")
	mustRun(t, home, "push")

	bad := mesh(t, home, "rotate", "postgres", "--consumer", "app", "--overlap=-1h")
	if bad.code != 2 || !strings.Contains(bad.err, "the overlap -1h0m0s is negative") || strings.Count(strings.TrimSpace(bad.err), "\n") != 0 {
		t.Fatalf("rotate --overlap -1h: exit %d\n%s%s", bad.code, bad.out, bad.err)
	}
	if ev := mustRun(t, home, "events").out; strings.Contains(ev, "CredentialRotated") {
		t.Fatalf("a refused rotation was recorded:\n%s", ev)
	}
	out := mustRun(t, home, "rotate", "postgres", "--consumer", "app", "--overlap", "2h").out
	if !strings.Contains(out, "postgres accepts the old credential too until every consumer end applied the new, or until ") {
		t.Fatalf("rotate: %s", out)
	}
	st := mesh(t, home, "status")
	if !strings.Contains(st.out, "rotation of the credentials postgres mints for app to generation 1: overlap, the old and the new accepted until ") ||
		!strings.Contains(st.out, "waiting on app-1 to apply it") {
		t.Fatalf("status during the overlap:\n%s", st.out)
	}
	args := []string{"status", "--json"}
	js := mesh(t, home, args...)
	if js.code > 1 {
		t.Fatalf("status --json: exit %d\n%s", js.code, js.err)
	}
	matchGolden(t, "status-rotation", args, js.out)
}
