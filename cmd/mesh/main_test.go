package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/meshctl/mesh/cmd/mesh/cmdline"
	"github.com/meshctl/mesh/embedded/embeddedtest"
)

// TestMain lets a test run this binary as a child process (for kill -9):
// with MESH_TEST_MAIN set, the test binary is mesh.
func TestMain(m *testing.M) {
	if os.Getenv("MESH_TEST_MAIN") == "1" {
		main()
		return
	}
	// Tests start many mesh ups; one HTTP port for all would collide. The
	// tests of the listener give --http themselves.
	os.Setenv("MESH_HTTP", "off")
	// No test reaches a bus named by the environment it was started in;
	// the tests that run beside others (t.Parallel) cannot t.Setenv, and
	// rely on this.
	os.Unsetenv("MESH_NATS_URL")
	os.Unsetenv("NATS_URL")
	// A command's handshake with a closed bus waits for the controller's
	// callout: bounded by Settle here, as every wait of the tests is, so a
	// loaded box is not taken for an unreachable bus.
	cmdline.ConnectTimeout = embeddedtest.Settle
	// The box's zone is not UTC here, whatever the machine's: a time that
	// reaches an answer without passing through UTC then carries +05:30,
	// and TestEveryJSONAnswerFollowsTheOneRule names it (the promise is
	// UTC everywhere, the README's "Scripting"). Before any goroutine
	// starts, so nothing reads time.Local while it changes.
	time.Local = time.FixedZone("UTC+5:30", 5*3600+30*60)
	// Temporary directories in memory where the box allows: see
	// embeddedtest.Main. A child mesh inherits TMPDIR.
	code := embeddedtest.Main(m)
	if greeter.dir != "" {
		os.RemoveAll(greeter.dir) // greeterOnPath's
	}
	os.Exit(code)
}

type result struct {
	code     int
	out, err string
}

func mesh(t *testing.T, home string, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), append([]string{"--home", home}, args...), &out, &errb)
	return result{code, out.String(), errb.String()}
}

// handedOut is every address freeAddr answered in this process: a port is
// free once its listener closes, and the kernel may give the same one to
// the next Listen, so two calls in one test (a bus and an HTTP listener)
// could name one port and the second listener fail to start.
var handedOut = struct {
	sync.Mutex
	addrs map[string]bool
}{addrs: map[string]bool{}}

func freeAddr(t *testing.T) string {
	t.Helper()
	handedOut.Lock()
	defer handedOut.Unlock()
	for {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		if !handedOut.addrs[addr] {
			handedOut.addrs[addr] = true
			return addr
		}
	}
}

// process is a mesh command running until stopped (mesh up, mesh agent).
type process struct {
	t      *testing.T
	args   []string
	cancel func()
	done   chan int
	log    *embeddedtest.LockedBuffer
}

func start(t *testing.T, until string, args ...string) *process {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	p := &process{t: t, args: args, cancel: cancel, done: make(chan int, 1), log: &embeddedtest.LockedBuffer{}}
	go func() { p.done <- run(ctx, args, io.Discard, p.log) }()
	// "ready" is the log line that says so, in text or JSON, not
	// "/readyz" in the line naming the HTTP listener, which up logs
	// before it records its bus (a test then found no bus in its home,
	// once in a loaded run).
	says := []string{until}
	if until == "ready" {
		says = []string{`msg="ready`, `"msg":"ready`}
	}
	embeddedtest.Eventually(t, fmt.Sprintf("mesh %v to say %q", args, until), func() bool {
		select {
		case code := <-p.done:
			t.Fatalf("mesh %v exited %d:\n%s", args, code, p.log)
		default:
		}
		log := p.log.String()
		return slices.ContainsFunc(says, func(s string) bool { return strings.Contains(log, s) })
	})
	t.Cleanup(p.stop)
	return p
}

// stop is Ctrl-C: the command must exit 0.
func (p *process) stop() {
	if p.cancel != nil {
		p.cancel()
		if code := <-p.done; code != 0 {
			p.t.Errorf("mesh %v exited %d on Ctrl-C:\n%s", p.args, code, p.log)
		}
		p.cancel = nil
	}
}

// up runs mesh up in this process until the test ends; it returns the log.
func up(t *testing.T, home string) *embeddedtest.LockedBuffer {
	t.Helper()
	return start(t, "ready", "--home", home, "up", "--listen", freeAddr(t)).log
}

func TestWalkthrough(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	up(t, home)

	r := mesh(t, home, "node", "enroll", "web-1", "--capability", "linux", "--label", "zone=a")
	// Sequence 1 is the controller recording its signing key, 2 its first admin.
	if r.code != 0 || !strings.Contains(r.out, "enrolled web-1 at sequence 3") {
		t.Fatalf("enroll: %+v", r)
	}
	r = mesh(t, home, "node", "list", "--json")
	var list struct{ Nodes []map[string]any }
	if err := json.Unmarshal([]byte(r.out), &list); err != nil || r.code != 0 || len(list.Nodes) != 1 {
		t.Fatalf("list --json: %v %+v", err, r)
	}
	nodes := list.Nodes
	for _, field := range []string{"name", "capabilities", "labels", "retired", "enrolled_at"} {
		if _, ok := nodes[0][field]; !ok {
			t.Errorf("node list --json lacks %q: %s", field, r.out)
		}
	}
	r = mesh(t, home, "events", "--json")
	var ev map[string]any
	if err := json.Unmarshal([]byte(strings.Split(r.out, "\n")[2]), &ev); err != nil || ev["seq"] != 3.0 || ev["type"] != "NodeEnrolled" || ev["by"] != "admin" {
		t.Fatalf("events --json: %v %+v", err, r)
	}
	for _, field := range []string{"seq", "subject", "type", "at", "by", "data"} {
		if _, ok := ev[field]; !ok {
			t.Errorf("events --json lacks %q: %s", field, r.out)
		}
	}
	r = mesh(t, home, "node", "retire", "web-1")
	if r.code != 0 || !strings.Contains(r.out, "retired web-1") {
		t.Fatalf("retire: %+v", r)
	}
	r = mesh(t, home, "node", "retire", "web-1")
	if r.code != 0 || !strings.Contains(r.out, "nothing to do") {
		t.Fatalf("retire again: %+v", r)
	}
	// node list says since when it is retired, not when it was enrolled.
	r = mesh(t, home, "node", "list")
	if f := strings.Fields(strings.Split(r.out, "\n")[1]); r.code != 0 || len(f) < 4 || f[1] != "retired" || f[2] != "since" || !rfc3339.MatchString(f[3]) {
		t.Fatalf("node list of a retired node: %+v", r)
	}
	r = mesh(t, home, "projections", "rebuild")
	// The key record, the first admin, the enrolment, its token, the retirement.
	if r.code != 0 || !strings.Contains(r.out, "5 event(s) folded") {
		t.Fatalf("rebuild: %+v", r)
	}
	r = mesh(t, home, "projections", "status")
	if r.code != 0 || !strings.Contains(r.out, "folded up to event 5 of 5 (lag 0)") {
		t.Fatalf("status: %+v", r)
	}
}

// Bad input: one sentence on stderr, a non-zero exit, and nothing recorded.
func TestBadInputIsOneSentence(t *testing.T) {
	// Beside the others: no bus from the environment (TestMain unsets it).
	t.Parallel()
	home := t.TempDir()
	up(t, home)
	mesh(t, home, "node", "enroll", "web-1")
	cases := []struct {
		args []string
		code int
		say  string
	}{
		// Not understood, refused by the controller: exit 2, as the command
		// line's own refusals.
		{[]string{"node", "enroll", "Web.1"}, 2, "lowercase letters, digits and '-'"},
		{[]string{"node", "enroll", "bad name"}, 2, "lowercase letters, digits and '-'"},
		{[]string{"node", "show", "a.>"}, 2, "lowercase letters"},
		{[]string{"node", "enroll", strings.Repeat("a", 64)}, 2, "at most 63"},
		{[]string{"node", "enroll", "web-1"}, 1, "the name is taken"},
		{[]string{"node", "show", "web-9"}, 1, "no node of that name is enrolled"},
		{[]string{"node", "retire", "web-9"}, 1, "no node of that name is enrolled"},
		{[]string{"up", "--listen", freeAddr(t)}, 1, "already in use"},
		{[]string{"node", "frobnicate"}, 2, "mesh --help"},
	}
	for _, c := range cases {
		r := mesh(t, home, c.args...)
		if r.code != c.code || !strings.Contains(r.err, c.say) || strings.Count(strings.TrimSpace(r.err), "\n") != 0 {
			t.Errorf("mesh %v: exit %d, stderr %q; want exit %d saying %q in one line", c.args, r.code, r.err, c.code, c.say)
		}
	}
	r := mesh(t, home, "events", "--json")
	if n := strings.Count(r.out, "\n"); n != 4 {
		t.Fatalf("after refused commands the log holds %d events, want the key record, the first admin, one enrolment and its token:\n%s", n, r.out)
	}
}

func TestNoControllerNoBusAndAmbiguousBus(t *testing.T) {
	home := t.TempDir()
	addr := freeAddr(t)
	t.Setenv("MESH_NATS_URL", "")
	start := time.Now()
	r := mesh(t, home, "--bus", "nats://"+addr, "node", "list")
	if r.code != 1 || !strings.Contains(r.err, addr) || !strings.Contains(r.err, "mesh up") || time.Since(start) > 5*time.Second {
		t.Fatalf("no bus: %+v after %s", r, time.Since(start))
	}
	t.Setenv("MESH_NATS_URL", "nats://127.0.0.1:1")
	r = mesh(t, home, "--bus", "nats://"+addr, "node", "list")
	if r.code != 2 || !strings.Contains(r.err, "configured two ways") {
		t.Fatalf("ambiguous bus: %+v", r)
	}
	// NATS_URL, which the nats CLI reads, names the bus when nothing
	// more particular to mesh does, and the error says it came from there.
	t.Setenv("MESH_NATS_URL", "")
	t.Setenv("NATS_URL", "nats://"+addr)
	r = mesh(t, home, "node", "list")
	if r.code != 1 || !strings.Contains(r.err, addr+" (from NATS_URL)") {
		t.Fatalf("a bus from NATS_URL: %+v", r)
	}
	t.Setenv("MESH_NATS_URL", "nats://127.0.0.1:1")
	if r = mesh(t, home, "node", "list"); r.code != 1 || !strings.Contains(r.err, "127.0.0.1:1") || strings.Contains(r.err, addr) {
		t.Fatalf("MESH_NATS_URL beside NATS_URL: %+v", r)
	}
}

func TestBusWithoutController(t *testing.T) {
	t.Parallel()
	// A bus with no controller on it: what a client meets when mesh serve died.
	home := t.TempDir()
	bus := embeddedtest.Server(t).ClientURL()
	start := time.Now()
	// A question no controller answered: its answer is unknown (exit 3).
	r := mesh(t, home, "--bus", bus, "node", "list")
	if r.code != 3 || !strings.Contains(r.err, "no mesh controller is answering") || !strings.Contains(r.err, bus) || time.Since(start) > 5*time.Second {
		t.Fatalf("bus without controller: %+v after %s", r, time.Since(start))
	}
}

// kill -9 of mesh up, then start again: the node is there, and the start says
// what it found.
func TestKillNineAndRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("runs mesh up as a child process")
	}
	t.Setenv("MESH_NATS_URL", "")
	home := t.TempDir()
	listen := freeAddr(t)
	child := startChild(t, home, listen)
	if r := mesh(t, home, "node", "enroll", "web-1", "-c", "linux"); r.code != 0 {
		t.Fatalf("enroll: %+v", r)
	}
	child.Process.Signal(syscall.SIGKILL)
	child.Wait()

	log := up(t, home)
	// The controller's key, the first admin (issue 33), web-1's enrolment and its token.
	if !strings.Contains(log.String(), "stream MESH unchanged: 4 event(s)") || !strings.Contains(log.String(), "signing as ") {
		t.Fatalf("the restart does not say what it found:\n%s", log)
	}
	r := mesh(t, home, "node", "show", "web-1", "--json")
	if r.code != 0 || !strings.Contains(r.out, `"name": "web-1"`) {
		t.Fatalf("after kill -9 and restart: %+v", r)
	}
}

func startChild(t *testing.T, home, listen string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "--home", home, "up", "--listen", listen)
	cmd.Env = append(os.Environ(), "MESH_TEST_MAIN=1")
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	ready := make(chan bool)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "ready") {
				ready <- true
			}
		}
		close(ready)
	}()
	select {
	case ok := <-ready:
		if !ok {
			t.Fatal("mesh up exited before it was ready")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("mesh up not ready in 20s")
	}
	return cmd
}

// mesh serve runs the controller alone on a bus it is pointed at.
func TestServeOnAnExistingBus(t *testing.T) {
	t.Setenv("MESH_NATS_URL", "")
	bus := embeddedtest.Server(t).ClientURL()
	home := t.TempDir()
	if r := mesh(t, home, "serve"); r.code != 2 || !strings.Contains(r.err, "MESH_NATS_URL") {
		t.Fatalf("serve with no bus named: %+v", r)
	}
	log := start(t, "ready", "--home", home, "--bus", bus, "serve", "--open-bus").log
	t.Setenv("MESH_NATS_URL", bus)
	if r := mesh(t, t.TempDir(), "node", "enroll", "db-1"); r.code != 0 {
		t.Fatalf("enroll through mesh serve: %+v\n%s", r, log)
	}
}
