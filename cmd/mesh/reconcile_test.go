package main

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meshctl/mesh/embedded/embeddedtest"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Rule 27 as an operator turns it on: mesh up --reconcile sends an
// assignment's change to the running agent with no mesh push; history
// says the reconciler sent it, status says it is on, and /metrics counts
// what it sent.
func TestUpReconcilesWithoutAPush(t *testing.T) {
	t.Parallel()
	home, httpAddr := t.TempDir(), freeAddr(t)
	start(t, "ready", "--home", home, "up", "--listen", freeAddr(t), "--http", httpAddr, "--reconcile", "--reconcile-rate", "5/1s")
	mustRun(t, home, "node", "enroll", "web-1")
	motd := filepath.Join(t.TempDir(), "motd.json")
	if err := writeFile(motd, `{"module":"motd","settings":{"text":{"default":"hi"}},
	  "resources":[{"kind":"file","path":"/etc/motd","mode":"0644","template":"{{.Settings.text}}\n"}]}`); err != nil {
		t.Fatal(err)
	}
	mustRun(t, home, "module", "register", motd)
	mustRun(t, home, "assign", "web-1", "motd")
	root := filepath.Join(t.TempDir(), "root")
	start(t, "following", "--home", home, "agent", "--join", joinOf(t, home, "web-1"), "--root", root)
	mustRun(t, home, "assign", "web-1", "motd", "--set", "text=hello")
	embeddedtest.Eventually(t, "web-1's motd to say hello with no push", func() bool {
		b, _ := os.ReadFile(filepath.Join(root, "etc/motd"))
		return string(b) == "hello\n"
	})
	if r := mesh(t, home, "history", "web-1"); !strings.Contains(r.out, "by reconciler") || strings.Contains(r.out, "by push") {
		t.Fatalf("history does not say the reconciler sent web-1 its declarations:\n%s", r.out)
	}
	embeddedtest.Eventually(t, "status to be well", func() bool { return mesh(t, home, "status").code == 0 })
	if r := mesh(t, home, "status"); !strings.Contains(r.out, "reconciler on (at most 5 declaration(s) every 1s): nothing queued") {
		t.Fatalf("status does not say the reconciler is on:\n%s", r.out)
	}
	resp, err := http.Get("http://" + httpAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if f := fams["mesh_reconciler_pushes_total"]; f == nil || f.GetMetric()[0].GetCounter().GetValue() < 1 {
		t.Fatalf("/metrics counts the reconciler's pushes as %v; want 1 or more", f)
	}
}

// A rate that is no rate is refused in one sentence naming the flag and
// the remedy, and nothing starts.
func TestAReconcileRateThatIsNoRate(t *testing.T) {
	t.Parallel()
	for _, rate := range []string{"0/1s", "many", "5/soon", "5/1ns"} {
		r := mesh(t, t.TempDir(), "up", "--listen", freeAddr(t), "--reconcile", "--reconcile-rate", rate)
		if r.code != 2 || !strings.Contains(r.err, "--reconcile-rate "+rate+": ") || !strings.Contains(r.err, "give N/D") || strings.Count(strings.TrimSpace(r.err), "\n") > 0 {
			t.Errorf("--reconcile-rate %s: exit %d, %q", rate, r.code, r.err)
		}
	}
	// A rate with the reconciler off: whoever gave it thinks it is on.
	r := mesh(t, t.TempDir(), "up", "--listen", freeAddr(t), "--reconcile-rate", "5/1s")
	if r.code != 2 || !strings.Contains(r.err, "--reconcile-rate 5/1s bounds the reconciler, which is off: add --reconcile") {
		t.Errorf("--reconcile-rate without --reconcile: exit %d, %q", r.code, r.err)
	}
}

// status --json with the reconciler on carries its object (reconciler),
// pinned by its golden file; its window of an hour has not come yet, so
// nothing is queued or sent.
func TestTheReconcilersStatusMatchesItsGoldenFile(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	start(t, "ready", "--home", home, "up", "--listen", freeAddr(t), "--reconcile", "--reconcile-rate", "1/1h")
	mustRun(t, home, "node", "enroll", "box")
	args := []string{"status", "--json"}
	r := mesh(t, home, args...)
	if r.code > 1 { // 1: not well (box was never sent), still an answer
		t.Fatalf("mesh status --json: exit %d\n%s%s", r.code, r.out, r.err)
	}
	matchGolden(t, "status-reconciling", args, r.out)
}
