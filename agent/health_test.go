package agent_test

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/meshctl/mesh/wire"
)

// lines counts the lines of a file under root ("" or missing: 0).
func lines(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	return strings.Count(string(b), "\n")
}

// A program whose check is a command that fails until a file exists: the
// agent says unhealthy once (with the check's own words), healthy once
// when the file appears, nothing while it stays so, unhealthy once when it
// goes; status follows each. Fails when a probe that changes nothing is
// reported, or a change is not. Probes every half second, not every
// second: the test waits out about seven of them, and a shell that takes
// half a second to start twice in a row is what two failures would need.
func TestACommandCheckReportsOnlyChangesOfHealth(t *testing.T) {
	t.Parallel()
	m := newMesh(t)
	m.Enroll("box")
	root := filepath.Join(t.TempDir(), "root")
	m.AgentWith("box", root, fast)
	m.WriteModule(`{"module":"svc","resources":[{"kind":"directory","path":"/srv","mode":"0755"}],
	  "run":{"command":"/bin/sh","args":["-c","exec sleep 600"],"dir":"/srv",
	    "health":{"command":["/bin/sh","-c","echo probe >> probes; test -e ready || { echo not ready yet >&2; exit 1; }"],
	      "interval":"500ms","timeout":"500ms","failures":2}}}`)
	m.Assign("box", "svc", nil)
	m.Report("box", m.Push("box").Sent[0].Digest)
	health := func() wire.Runtime { return m.runtimeState("box", "svc") }

	eventually(t, "the failing check to be said", func() bool { return health().Health == wire.HealthUnhealthy })
	if rt := health(); !strings.Contains(rt.HealthDetail, "2 failed check(s) in a row; the check /bin/sh exited with code 1: not ready yet") {
		t.Fatalf("unhealthy, but why not: %+v", rt)
	}
	s, err := m.H.Status.Status(m.Ctx, wire.StatusRequest{})
	m.Must(err)
	if s.Well {
		t.Fatal("status is well with an unhealthy program")
	}

	m.Must(os.WriteFile(filepath.Join(root, "srv/ready"), nil, 0o644))
	eventually(t, "the passing check to be said", func() bool { return health().Health == wire.HealthHealthy })
	// Steady: three more probes pass, and none is reported.
	probes := filepath.Join(root, "srv/probes")
	seen := lines(t, probes)
	eventually(t, "three more probes", func() bool { return lines(t, probes) >= seen+3 })
	if r := m.runtimeReports("box"); r["RuntimeHealthy"] != 1 || r["RuntimeUnhealthy"] != 1 {
		t.Fatalf("a steady program's probes were reported: %v", r)
	}
	if s, err = m.H.Status.Status(m.Ctx, wire.StatusRequest{}); err != nil || !s.Well {
		t.Fatalf("status with a healthy program: well %v (%v): %v", s.Well, err, s.Causes)
	}

	m.Must(os.Remove(filepath.Join(root, "srv/ready")))
	eventually(t, "the check failing again to be said", func() bool { return health().Health == wire.HealthUnhealthy })
	if r := m.runtimeReports("box"); r["RuntimeHealthy"] != 1 || r["RuntimeUnhealthy"] != 2 {
		t.Fatalf("reports of health: %v, want one healthy and two unhealthy", r)
	}
	m.Verified()
}

// The TCP and HTTP probes against real listeners on the node: a port that
// accepts, then is closed; an answer of 200, then of 503. A restarted
// program starts again from "starting", never from its predecessor's word.
func TestTCPAndHTTPProbes(t *testing.T) {
	t.Parallel()
	m := newMesh(t)
	m.Enroll("box")
	m.AgentWith("box", filepath.Join(t.TempDir(), "root"), fast)
	port, err := net.Listen("tcp", "127.0.0.1:0")
	m.Must(err)
	var status atomic.Int32
	status.Store(http.StatusOK)
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(int(status.Load())) }))
	defer web.Close()
	check := func(module, probe string) string {
		// A probe of this process's own listeners answers at once: a
		// quarter of a second between them is plenty, and the test waits
		// out several.
		return fmt.Sprintf(`{"module":%q,"run":{"command":"/bin/sh","args":["-c","exec sleep 600"],"health":{%s,"interval":"250ms","timeout":"250ms","failures":1}}}`, module, probe)
	}
	m.WriteModule(check("tcpsvc", fmt.Sprintf(`"tcp":%q`, port.Addr().String())))
	m.WriteModule(check("websvc", fmt.Sprintf(`"http":%q`, web.URL+"/healthz")))
	m.Assign("box", "tcpsvc", nil)
	m.Assign("box", "websvc", nil)
	m.Report("box", m.Push("box").Sent[0].Digest)
	for _, module := range []string{"tcpsvc", "websvc"} {
		eventually(t, module+" to be healthy", func() bool { return m.runtimeState("box", module).Health == wire.HealthHealthy })
	}

	port.Close()
	eventually(t, "the closed port to be said", func() bool { return m.runtimeState("box", "tcpsvc").Health == wire.HealthUnhealthy })
	if d := m.runtimeState("box", "tcpsvc").HealthDetail; !strings.Contains(d, "cannot connect to "+port.Addr().String()) {
		t.Fatalf("why the port is unhealthy: %q", d)
	}
	status.Store(http.StatusServiceUnavailable)
	eventually(t, "the 503 to be said", func() bool { return m.runtimeState("box", "websvc").Health == wire.HealthUnhealthy })
	if d := m.runtimeState("box", "websvc").HealthDetail; !strings.Contains(d, "answered 503 Service Unavailable") {
		t.Fatalf("why the page is unhealthy: %q", d)
	}
	m.Verified()
}
