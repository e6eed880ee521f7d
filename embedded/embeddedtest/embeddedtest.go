// Package embeddedtest starts real embedded NATS servers for tests, with
// cleanup registered, so that every test of the mesh runs against JetStream
// itself rather than a fake of it.
package embeddedtest

import (
	"context"
	"flag"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/meshctl/mesh/embedded"
	"github.com/nats-io/nats.go"
)

// Server starts a single JetStream server in a temporary directory, listening
// on a free loopback port, and stops it when the test ends.
func Server(t testing.TB) *embedded.Server {
	t.Helper()
	return ServerIn(t, t.TempDir())
}

// ServerIn is Server with its data in dir: for a test that reaches under
// the bus (removes its directory, fills its disk, reads what it wrote).
func ServerIn(t testing.TB, dir string) *embedded.Server {
	t.Helper()
	s, err := embedded.Start(context.Background(), embedded.Options{Dir: dir, Port: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// Conn connects to s over loopback TCP and closes the connection when the test ends.
func Conn(t testing.TB, s *embedded.Server) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// Cluster starts n servers in one cluster and stops them when the test ends.
func Cluster(t testing.TB, n int) []*embedded.Server {
	t.Helper()
	servers, err := embedded.StartCluster(context.Background(), t.TempDir(), n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, s := range servers {
			s.Close()
		}
	})
	return servers
}

// Settle is how long a test waits for agents, controllers and the fold to
// reach a state: far above what any needs on a loaded 2-core machine, so
// only a real failure reaches it.
const Settle = 30 * time.Second

// Eventually polls cond until it holds, failing the test after Settle with
// what it waited for. It bounds a wait; it orders nothing. Every test of
// the mesh polls with it.
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(Settle)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %s, still waiting for %s", Settle, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Parallel is how many tests that call t.Parallel a package runs at once
// (see Main): waiting, most of them, not computing.
var Parallel = max(4, 2*runtime.GOMAXPROCS(0))

// outlives is the temporary directory the test binary was started with,
// before Main gave it one in memory that goes with it.
var outlives = os.TempDir()

// Outlives is a directory for what must outlive the test binary (a
// failure's goroutine stacks, a screenshot): the one it was started
// with, not the one Main removes as the binary ends.
func Outlives() string { return outlives }

// Main runs a package's tests (call it from TestMain: os.Exit(Main(m))),
// with their temporary directories on a memory file system when the box
// has one (/dev/shm) and TMPDIR does not name a place already. The parts
// stay real (JetStream's files, Pebble, the agents' files and their
// fsyncs), but a virtual disk's fsync, which the agents do on every apply,
// took half of the fleet tests' time on a 2-core box and made them slow
// and unsteady beside other work. MESH_TEST_DISK=1 keeps the disk.
//
// It also runs more of the tests that call t.Parallel at once than go
// test's default of one a core, unless the run sets -test.parallel: the
// mesh's long tests mostly wait (for a lifetime, a liveness bound, a
// timeout, a browser), and two at a time left the cores idle while the
// suite took twice its 60 s on a 2-core box.
func Main(m *testing.M) int {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		flag.Set("test.parallel", strconv.Itoa(Parallel))
	}
	if os.Getenv("TMPDIR") == "" && os.Getenv("MESH_TEST_DISK") == "" {
		if dir, err := os.MkdirTemp("/dev/shm", "mesh-test-"); err == nil {
			// Open to every user as /tmp is: a test runs a program as
			// another user, in a directory of its own under this one.
			os.Chmod(dir, 0o1777)
			os.Setenv("TMPDIR", dir)
			defer os.RemoveAll(dir)
		}
	}
	return m.Run()
}
