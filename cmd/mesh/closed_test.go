package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meshctl/mesh/busauth"
	"github.com/meshctl/mesh/embedded"
)

// A cluster closed with what mesh bus-config prints, its controller run by
// mesh serve --closed: the operator's commands and a node's agent work
// through any server, and a command from a home without the operator key is
// refused with the remedy.
func TestClosedCluster(t *testing.T) {
	t.Setenv("MESH_NATS_URL", "")
	home := t.TempDir()
	r := mesh(t, home, "bus-config")
	key, err := busauth.HomeKey(home, false)
	if r.code != 0 || err != nil {
		t.Fatalf("bus-config: %+v %v", r, err)
	}
	keys, _ := busauth.ClusterBusKeys(key)
	if r.out != keys.ServerConfig() || !strings.Contains(r.out, "auth_callout") {
		t.Fatalf("bus-config printed:\n%s", r.out)
	}
	if again := mesh(t, home, "bus-config"); again.out != r.out {
		t.Fatal("bus-config printed another block for the same key")
	}
	servers, err := embedded.StartClosedCluster(context.Background(), t.TempDir(), 3, embedded.AuthOf(keys.Public()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, s := range servers {
			s.Close()
		}
	})
	start(t, "ready", "--home", home, "--bus", servers[0].ClientURL(), "serve", "--closed", "--replicas", "3")
	bus := servers[1].ClientURL()
	must := func(args ...string) result {
		t.Helper()
		r := mesh(t, home, append([]string{"--bus", bus}, args...)...)
		if r.code != 0 {
			t.Fatalf("mesh %v: %+v", args, r)
		}
		return r
	}
	must("node", "enroll", "web-1")
	join := strings.TrimSpace(must("node", "join", "web-1").out)
	start(t, "following", "--home", t.TempDir(), "agent", "--join", join, "--root", filepath.Join(t.TempDir(), "root"))
	if r := must("push", "web-1", "--wait", "10s"); !strings.Contains(r.out, "web-1 applied") {
		t.Fatalf("push --wait on a closed cluster: %+v", r)
	}
	if r := mesh(t, t.TempDir(), "--bus", bus, "status"); r.code == 0 || !strings.Contains(r.err, "holds no operator key") {
		t.Fatalf("status from a home without the operator key: %+v", r)
	}
}
