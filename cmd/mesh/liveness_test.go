package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/meshctl/mesh/embedded/embeddedtest"
)

// child runs mesh with args as a process of its own, so a test can kill it
// with SIGKILL as an operator's machine dies, and answers once its log
// says until.
func child(t *testing.T, until string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "MESH_TEST_MAIN=1")
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	said := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		for once := false; sc.Scan(); {
			if !once && strings.Contains(sc.Text(), until) {
				close(said)
				once = true
			}
		}
	}()
	embeddedtest.Eventually(t, "mesh "+strings.Join(args[:3], " ")+" to say "+until, func() bool {
		select {
		case <-said:
			return true
		default:
			return false
		}
	})
	return cmd
}

// Issue 28, as an operator meets it: kill -9 an agent, and within the bound
// status names it unreachable and exits 1, though its last report was
// applied, and its program is not running but unknown; start it again and
// the mesh is well.
func TestAKilledAgentIsUnreachable(t *testing.T) {
	t.Parallel() // long and mostly waiting: beside the others (see TestMain)
	home := t.TempDir()
	start(t, "ready", "--home", home, "up", "--listen", freeAddr(t), "--unreachable-after", "10s")
	mustRun(t, home, "node", "enroll", "web-1")
	motd := filepath.Join(t.TempDir(), "motd.json")
	if err := writeFile(motd, `{"module":"motd","resources":[{"kind":"file","path":"/etc/motd","mode":"0644","content":"hi\n"}],
	  "run":{"command":"/bin/sh","args":["-c","exec sleep 600"]}}`); err != nil {
		t.Fatal(err)
	}
	mustRun(t, home, "module", "register", motd)
	mustRun(t, home, "assign", "web-1", "motd")
	args := []string{"--home", home, "agent", "--join", joinOf(t, home, "web-1"), "--root", filepath.Join(t.TempDir(), "root")}
	agent := child(t, "following", args...)
	mustRun(t, home, "push", "web-1", "--wait", "10s")
	// Well comes with the applied report, running with the program's own
	// report a moment later: both are waited for.
	embeddedtest.Eventually(t, "motd's program to run", func() bool {
		r := mesh(t, home, "status")
		return r.code == 0 && strings.Contains(r.out, "motd on web-1 running")
	})

	agent.Process.Signal(syscall.SIGKILL)
	agent.Wait()
	var r result
	embeddedtest.Eventually(t, "status to name web-1 unreachable", func() bool {
		r = mesh(t, home, "status")
		return strings.Contains(r.out, "unreachable  ")
	})
	// Its program's pid died with it: not running, unknown.
	if r.code != 1 || !strings.Contains(r.out, "its last state: current") || !strings.Contains(r.out, "1 of them unreachable") ||
		!strings.Contains(r.out, "motd on web-1 unknown") {
		t.Fatalf("status with web-1's agent killed: exit %d\n%s", r.code, r.out)
	}
	if r := mesh(t, home, "node", "list"); !strings.Contains(r.out, "unreachable since") {
		t.Fatalf("node list does not say web-1 is unreachable:\n%s", r.out)
	}

	child(t, "following", args...)
	embeddedtest.Eventually(t, "status to be well again", func() bool { return mesh(t, home, "status").code == 0 })
	if r := mesh(t, home, "history", "web-1"); !strings.Contains(r.out, "unreachable: not heard for over 10s") ||
		!strings.Contains(r.out, "reachable: heard again") || !strings.Contains(r.out, "2 change(s) of whether it was heard") {
		t.Fatalf("history does not say when web-1 went dark:\n%s", r.out)
	}
}

// The bound is the operator's: too short is refused in one sentence and
// nothing is made; off is said by status, which then names no dead node.
func TestTheUnreachableBound(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	if r := mesh(t, home, "up", "--listen", freeAddr(t), "--unreachable-after", "5s"); r.code != 2 || !strings.Contains(r.err, "at least 10s") {
		t.Fatalf("a bound under two beats: %+v", r)
	}
	start(t, "ready", "--home", home, "up", "--listen", freeAddr(t), "--unreachable-after", "off")
	if r := mesh(t, home, "status"); !strings.Contains(r.out, "liveness is off") || strings.Contains(r.out, "is unreachable (mesh up") {
		t.Fatalf("status with liveness off:\n%s", r.out)
	}
}
