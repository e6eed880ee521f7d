package agent_test

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/meshctl/mesh/agent"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/events/store"
	"github.com/meshctl/mesh/projections"
	"github.com/meshctl/mesh/wire"
)

// A module that runs a real program: it writes its pid to starts (in its
// working directory, under the root) each time it starts, then sleeps.
const svcModule = `{"module":"svc","settings":{"greeting":{"default":"hello"}},
  "resources":[{"kind":"directory","path":"/srv","mode":"0755"},
    {"kind":"file","path":"/srv/svc.conf","mode":"0644","template":"greeting = {{.Settings.greeting}}\n"}],
  "run":{"command":"/bin/sh","args":["-c","echo $$ >> starts; exec sleep 600"],"dir":"/srv"}}`

// fast is supervision on a test's time scale.
func fast(c *agent.Config) {
	c.Supervision = agent.Supervision{RestartMin: 20 * time.Millisecond, RestartMax: 80 * time.Millisecond,
		LoopExits: 3, LoopWindow: time.Minute, Grace: 2 * time.Second}
}

// pids reads the pids the program wrote, one a start.
func pids(t *testing.T, root string) []int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "srv/starts"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, l := range strings.Fields(string(b)) {
		n, err := strconv.Atoi(l)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, n)
	}
	return out
}

func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

// runtimeReports counts node's runtime reports of each type in the stream.
func (m *mesh) runtimeReports(node string) map[string]int {
	m.T.Helper()
	out := map[string]int{}
	m.Must(m.H.Core.Store.Read(m.Ctx, store.ReadOptions{Filter: events.ReportFilter(node)}, func(msg store.Msg) error {
		if _, ev, err := events.DecodeFromSubject(msg.Subject, msg.Data); err == nil && events.RuntimeModule(ev) != "" {
			out[ev.EventType()]++
		}
		return nil
	}))
	return out
}

// runtimeState is the status of module's program on node ("" for none).
func (m *mesh) runtimeState(node, module string) projections.Runtime {
	m.T.Helper()
	s, err := m.H.Status.Status(m.Ctx, wire.StatusRequest{})
	m.Must(err)
	for _, rt := range s.Runtimes {
		if rt.Node == node && rt.Module == module {
			return rt
		}
	}
	return projections.Runtime{}
}

// A module's program with real processes: started after the apply,
// restarted exactly once by a config change, restarted when killed from
// outside (and the signal reported), stopped when unassigned, and stopped
// with its agent. Fails when a config change does not restart it (or
// restarts it twice), when an exit is not reported, or when a child
// outlives its module or its agent.
func TestAModuleRunsUnderItsAgent(t *testing.T) {
	t.Parallel()
	m := newMesh(t)
	m.Enroll("box")
	root := filepath.Join(t.TempDir(), "root")
	stop := m.AgentWith("box", root, fast)
	m.WriteModule(svcModule)
	m.Assign("box", "svc", nil)
	m.Report("box", m.Push("box").Sent[0].Digest)
	eventually(t, "the program to start", func() bool { return len(pids(t, root)) == 1 })
	eventually(t, "status to say it runs", func() bool { return m.runtimeState("box", "svc").State == projections.RuntimeRunning })
	first := pids(t, root)[0]

	// A config change: the program reads it again, so it starts again, once.
	m.Assign("box", "svc", map[string]string{"greeting": "hi"})
	m.Report("box", m.Push("box").Sent[0].Digest)
	eventually(t, "the program to start again", func() bool { return len(pids(t, root)) == 2 })
	if alive(first) {
		t.Fatalf("the program before the change (pid %d) still runs", first)
	}
	eventually(t, "the restart's reports", func() bool { return m.runtimeReports("box")["RuntimeStarted"] == 2 })
	if r := m.runtimeReports("box"); r["RuntimeStopped"] != 1 || r["RuntimeExited"] != 0 {
		t.Fatalf("a config change was reported as %v, not one stop and one start", r)
	}
	// A push that changes nothing of it does not restart it.
	m.Report("box", m.Push("box").Sent[0].Digest)

	// Killed from outside: the exit is reported and it is started again.
	second := pids(t, root)[1]
	m.Must(syscall.Kill(second, syscall.SIGKILL))
	eventually(t, "the killed program to start again", func() bool { return len(pids(t, root)) == 3 })
	eventually(t, "the kill to be reported", func() bool { return m.runtimeReports("box")["RuntimeExited"] == 1 })
	if n := len(pids(t, root)); n != 3 {
		t.Fatalf("%d starts: a push that changed nothing restarted the program", n)
	}

	// Unassigned: stopped, and status no longer lists it.
	third := pids(t, root)[2]
	_, err := m.H.Nodes.Unassign(m.Ctx, wire.UnassignRequest{CommandID: wire.NewCommandID(), Node: "box", Module: "svc"})
	m.Must(err)
	m.Report("box", m.Push("box").Sent[0].Digest)
	eventually(t, "the unassigned program to stop", func() bool { return !alive(third) })
	eventually(t, "status to forget it", func() bool { return m.runtimeState("box", "svc").Module == "" })

	// The agent stopped: its programs stop with it.
	m.Assign("box", "svc", nil)
	m.Report("box", m.Push("box").Sent[0].Digest)
	eventually(t, "the program to start for the last time", func() bool { return len(pids(t, root)) == 4 })
	fourth := pids(t, root)[3]
	stop()
	if alive(fourth) {
		t.Fatalf("the agent stopped and its program (pid %d) still runs", fourth)
	}
	m.Verified()
}

// A program that keeps exiting is named crash-looping in status, with its
// last line of errors, and the mesh is not well.
func TestACrashLoopIsNamed(t *testing.T) {
	t.Parallel()
	m := newMesh(t)
	m.Enroll("box")
	m.AgentWith("box", filepath.Join(t.TempDir(), "root"), fast)
	m.WriteModule(`{"module":"crashy","run":{"command":"/bin/sh","args":["-c","echo cannot bind port 80 >&2; exit 3"]}}`)
	m.Assign("box", "crashy", nil)
	m.Report("box", m.Push("box").Sent[0].Digest)
	eventually(t, "the crash loop to be named", func() bool { return m.runtimeState("box", "crashy").State == projections.RuntimeCrashLooping })
	s, err := m.H.Status.Status(m.Ctx, wire.StatusRequest{})
	m.Must(err)
	// Why it ended, in its own words: its last line of errors.
	if d := m.runtimeState("box", "crashy").Detail; s.Well || !strings.Contains(d, "exited with code 3: cannot bind port 80") {
		t.Fatalf("status with a crash loop: well %v, %+v", s.Well, m.runtimeState("box", "crashy"))
	}
	// Retired, the node's programs are no longer the mesh's: status lists
	// none of them, and the crash loop no longer keeps the mesh unwell.
	_, err = m.H.Nodes.Retire(m.Ctx, wire.RetireRequest{CommandID: wire.NewCommandID(), Name: "box"})
	m.Must(err)
	eventually(t, "status to drop the retired node's program", func() bool { return m.runtimeState("box", "crashy").Module == "" })
	if s, err = m.H.Status.Status(m.Ctx, wire.StatusRequest{}); err != nil || !s.Well {
		t.Fatalf("status with only a retired node's crash loop: well %v, causes %v (%v)", s.Well, s.Causes, err)
	}
}

// A program run as another user runs as that user and can read its own
// key (issue 15's user). Only an agent running as root can do this.
func TestAProgramRunsAsItsUser(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("running a program as another user needs an agent running as root")
	}
	// The program's user reaches its root through the system's temporary
	// directory, which this test does not change: a TMPDIR only its owner
	// may pass (mktemp -d makes one) leaves nobody outside it.
	if fi, err := os.Stat(os.TempDir()); err != nil || fi.Mode().Perm()&0o001 == 0 {
		t.Skipf("TMPDIR %s cannot be passed through by another user (%v): run with a TMPDIR others may pass, as /tmp", os.TempDir(), err)
	}
	m := newMesh(t)
	m.Enroll("box")
	base := t.TempDir()
	// The temporary directories are 0700: the user must pass through them.
	// Only those the test made: from base up to, not including, the
	// system's temporary directory.
	for d := base; strings.HasPrefix(d, os.TempDir()+string(filepath.Separator)); d = filepath.Dir(d) {
		m.Must(os.Chmod(d, 0o755))
	}
	root := filepath.Join(base, "root")
	m.AgentWith("box", root, fast)
	m.WriteModule(`{"module":"nobodys","resources":[{"kind":"directory","path":"/work","mode":"0777"}],
	  "run":{"command":"/bin/sh","args":["-c","test -r \"$MESH_NKEY\" && id -u > uid; exec sleep 600"],"dir":"/work","user":"nobody"}}`)
	m.Assign("box", "nobodys", nil)
	m.Report("box", m.Push("box").Sent[0].Digest)
	eventually(t, "the program to say who it runs as", func() bool {
		b, _ := os.ReadFile(filepath.Join(root, "work/uid"))
		return strings.TrimSpace(string(b)) != ""
	})
	b, _ := os.ReadFile(filepath.Join(root, "work/uid"))
	if got := strings.TrimSpace(string(b)); got == "0" {
		t.Fatalf("the program ran as root, not as nobody")
	}
}
