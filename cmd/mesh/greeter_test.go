package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshctl/mesh/busauth"
	"github.com/meshctl/mesh/embedded/embeddedtest"

	"github.com/meshctl/mesh/events"
	"github.com/nats-io/nats.go"
)

// The example that runs (issue 15), as an operator runs it: the greeter
// program, built here, is started by a real agent on mesh up's closed bus,
// serves greetings as itself, starts again (once) when its config changes,
// reports itself failing a consumer while it has no greeting to give and
// recovered when it has one again, and status says each.
func TestTheGreeterRunsServesAndReportsItsStanding(t *testing.T) {
	t.Parallel()
	greeterOnPath(t)
	home := t.TempDir()
	listen := freeAddr(t)
	start(t, "ready", "--home", home, "up", "--listen", listen)
	putGreeter(t, home)
	mustRun(t, home, "node", "enroll", "box")
	start(t, "following", "--home", t.TempDir(), "agent", "--join", joinOf(t, home, "box"), "--root", filepath.Join(t.TempDir(), "root"))
	mustRun(t, home, "module", "register", greeterOnAFreePort(t))
	// visitor consumes greeting: the consumer greeter's standing names.
	mustRun(t, home, "module", "register", "../../examples/visitor.json")
	mustRun(t, home, "assign", "box", "visitor")
	opts, err := busauth.OperatorOptions(home)
	if err != nil {
		t.Fatal(err)
	}
	op, err := nats.Connect("nats://"+listen, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer op.Close()
	ask := func() string {
		msg := nats.NewMsg(events.ServiceSubject("greeting", "box"))
		msg.Header.Set("Mesh-Consumer", "visitor")
		r, err := op.RequestMsg(msg, 2*time.Second)
		if err != nil {
			return err.Error()
		}
		return string(r.Data)
	}
	until := func(what string, cond func() bool) {
		t.Helper()
		embeddedtest.Eventually(t, what, cond)
	}
	set := func(greeting string) {
		t.Helper()
		mustRun(t, home, "assign", "box", "greeter", "--set", "greeting="+greeting)
		mustRun(t, home, "push", "box", "--wait", "10s")
	}
	mustRun(t, home, "assign", "box", "greeter")
	mustRun(t, home, "push", "box", "--wait", "10s")
	until("the default greeting", func() bool { return ask() == "hello" })
	if out := mesh(t, home, "status").out; !strings.Contains(out, "greeter on box running") {
		t.Fatalf("status with the greeter running:\n%s", out)
	}

	set("hi")
	until("the changed greeting", func() bool { return ask() == "hi" })
	if n := strings.Count(mustRun(t, home, "events").out, "mesh.rp.box.RuntimeStarted"); n != 2 {
		t.Fatalf("a config change started the greeter %d time(s) in all, not twice", n)
	}

	until("its health check to pass", func() bool {
		return strings.Contains(mesh(t, home, "status").out, "; healthy since ")
	})
	set("")
	until("the greeter to refuse", func() bool { return strings.HasPrefix(ask(), "error: no greeting") })
	// With nothing to greet with, its check fails too: 503 from its
	// health endpoint, twice in a row.
	until("status to name it unhealthy", func() bool {
		return strings.Contains(mesh(t, home, "status").out, "; unhealthy since ")
	})
	if out := mesh(t, home, "status").out; !strings.Contains(out, "2 failed check(s) in a row; GET http://127.0.0.1:") || !strings.Contains(out, "/healthz answered 503 Service Unavailable") {
		t.Fatalf("status with the greeter unhealthy:\n%s", out)
	}
	until("status to name it failing visitor", func() bool {
		return strings.Contains(mesh(t, home, "status").out, "greeter on box failing visitor")
	})
	set("hey")
	until("the greeter to serve again", func() bool { return ask() == "hey" })
	until("its recovery", func() bool {
		r := mesh(t, home, "status")
		return r.code == 0 && !strings.Contains(r.out, "failing visitor")
	})
}

// greeterOnAFreePort is examples/greeter.json with its health port moved
// to a free one (tests of other packages, or another run, may hold the
// example's), and its start period cut from ten seconds to two: the test
// waits for the check to fail twice after it, and the greeter answers its
// check as soon as it runs.
func greeterOnAFreePort(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../../examples/greeter.json")
	if err != nil {
		t.Fatal(err)
	}
	const period = `"start_period": "10s"`
	if strings.Count(string(b), period) != 1 {
		t.Fatalf("examples/greeter.json names %s other than once", period)
	}
	module := strings.Replace(onPort(t, string(b), freePort(t)), period, `"start_period": "2s"`, 1)
	path := filepath.Join(t.TempDir(), "greeter.json")
	if err := os.WriteFile(path, []byte(module), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// greeterPortDefault is examples/greeter.json's port setting, whose
// default its env and health check read (manifest/runtemplate.go).
const (
	greeterPort        = "4281"
	greeterPortDefault = `"port": {"default": "` + greeterPort + `"}`
)

// onPort is the greeter's manifest doc with its port's default moved to
// port.
func onPort(t *testing.T, doc, port string) string {
	t.Helper()
	if strings.Count(doc, greeterPortDefault) != 1 {
		t.Fatalf("examples/greeter.json sets no %s: its env and check read it", greeterPortDefault)
	}
	return strings.Replace(doc, greeterPortDefault, `"port": {"default": "`+port+`"}`, 1)
}

// freePort is the port of freeAddr.
func freePort(t *testing.T) string {
	_, port, _ := strings.Cut(freeAddr(t), ":")
	return port
}

// greeter is the example greeter built once for this test binary.
var greeter struct {
	once sync.Once
	dir  string
	err  error
}

// greeterOnPath builds examples/mesh-greeter once for this test binary and
// puts its directory first on the process's PATH, where every agent this
// process runs finds its programs. The process's, not t.Setenv: the README
// walkthrough runs beside other tests (t.Parallel), and the directory holds
// only mesh-greeter, which no other test's program names. TestMain removes
// it.
func greeterOnPath(t *testing.T) {
	t.Helper()
	greeter.once.Do(func() {
		if greeter.dir, greeter.err = os.MkdirTemp("", "mesh-greeter"); greeter.err != nil {
			return
		}
		build := exec.Command("go", "build", "-o", filepath.Join(greeter.dir, "mesh-greeter"), "../../examples/mesh-greeter")
		if out, err := build.CombinedOutput(); err != nil {
			greeter.err = fmt.Errorf("building the greeter: %v\n%s", err, out)
			return
		}
		greeter.err = os.Setenv("PATH", greeter.dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	})
	if greeter.err != nil {
		t.Fatal(greeter.err)
	}
}

// putGreeter puts the greeter, built here, into home's mesh as artifact
// mesh-greeter, which examples/greeter.json installs and runs (issue 32).
func putGreeter(t *testing.T, home string) {
	t.Helper()
	mustRun(t, home, "artifact", "put", greeterBinary(t))
}

// greeterBinary is the greeter, built once for this test binary.
func greeterBinary(t *testing.T) string {
	t.Helper()
	greeterOnPath(t)
	return filepath.Join(greeter.dir, "mesh-greeter")
}
