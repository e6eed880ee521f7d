package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meshctl/mesh/cmd/mesh/cmdline"
	"github.com/nats-io/nats.go"
)

// mesh up --tls (issue 16): the walkthrough works with agents that have
// nothing but their join strings (which carry the CA), a client without
// the CA is refused, and a bus on the network without TLS is refused
// unless asked for in clear.
func TestTLSOnTheBus(t *testing.T) {
	t.Parallel()
	home, listen := t.TempDir(), freeAddr(t)
	start(t, "ready", "--home", home, "up", "--listen", listen, "--tls")
	if rec, err := cmdline.ReadBusRecord(home); err != nil || !strings.HasPrefix(rec.URL, "tls://") {
		t.Fatalf("mesh up --tls recorded %+v (%v)", rec, err)
	}
	mustRun(t, home, "node", "enroll", "box")
	join := joinOf(t, home, "box")
	// The agent's home holds no CA: the join string is all it has.
	root := filepath.Join(t.TempDir(), "root")
	start(t, "following", "--home", t.TempDir(), "agent", "--join", join, "--root", root)
	doc := filepath.Join(t.TempDir(), "motd.json")
	if err := writeFile(doc, `{"module":"motd","resources":[{"kind":"file","path":"/etc/motd","mode":"0644","content":"over tls\n"}]}`); err != nil {
		t.Fatal(err)
	}
	mustRun(t, home, "module", "register", doc)
	mustRun(t, home, "assign", "box", "motd")
	mustRun(t, home, "push", "box", "--wait", "10s")
	if b, err := os.ReadFile(filepath.Join(root, "etc/motd")); err != nil || string(b) != "over tls\n" {
		t.Fatalf("the agent over TLS wrote %q (%v)", b, err)
	}
	// Without the CA: refused before anything else is said.
	if nc, err := nats.Connect("tls://" + listen); err == nil {
		nc.Close()
		t.Fatal("a client without the bus's CA connected")
	} else if !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("a client without the CA was refused, but not for its certificate: %v", err)
	}
	// And in clear: the TLS bus does not speak it.
	if nc, err := nats.Connect("nats://" + listen); err == nil {
		nc.Close()
		t.Fatal("a client in clear connected to a TLS bus")
	}
	r := mesh(t, t.TempDir(), "up", "--listen", "0.0.0.0:"+strings.Split(freeAddr(t), ":")[1])
	if r.code != 2 || !strings.Contains(r.err, "give --tls") {
		t.Fatalf("mesh up on every address without --tls: %+v", r)
	}
}
