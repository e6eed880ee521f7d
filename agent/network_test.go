package agent_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meshctl/mesh/declaration"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/events/store"
	"github.com/meshctl/mesh/wire"
	"github.com/nats-io/nkeys"
)

// The overlay with real agents (issue 18): each node's WireGuard file,
// rendered from the example module, holds its own address and private key
// (the one its agent derives from its join string) and lists its peers
// (the nodes it receives from and those that receive from it) with their
// addresses and public keys; a new consumer enrolled is among the
// provider's peers on the next push; the private key is never in the log
// in clear. Fails when a peer is missing or a key differs from the one the
// node itself derives.
func TestTheOverlayInEveryDeclaration(t *testing.T) {
	t.Parallel()
	m := newMesh(t)
	_, err := m.H.Network.SetNetwork(m.Ctx, wire.NetworkRequest{CommandID: wire.NewCommandID(), CIDR: "10.50.0.0/24"})
	m.Must(err)
	m.Register("wireguard.json")
	m.WriteModule(`{"module":"svc","provides":["thing"],"settings":{"port":{"default":"7000"}}}`)
	m.WriteModule(`{"module":"cli","consumes":["thing"],"resources":[{"kind":"file","path":"/etc/cli.conf","mode":"0644","template":"server = {{.Receives.thing.Address}}:{{.Receives.thing.Settings.port}}\n"}]}`)
	roots := map[string]string{}
	start := func(node, module string) {
		m.Enroll(node)
		roots[node], _ = m.Agent(node)
		m.Assign(node, module, nil)
		m.Assign(node, "wireguard", nil)
	}
	start("hub", "svc")
	start("edge-1", "cli")
	pushAll := func() {
		for _, s := range m.Push("").Sent {
			m.Report(s.Node, s.Digest)
		}
	}
	pushAll()
	view := func(n string) wire.NodeView {
		v, err := m.H.Status.ShowNode(m.Ctx, wire.NameRequest{Name: n})
		m.Must(err)
		return v
	}
	wg := func(n string) string {
		b, err := os.ReadFile(filepath.Join(roots[n], "etc/wireguard/mesh0.conf"))
		m.Must(err)
		return string(b)
	}
	// Each node's overlay key is the one its agent made (issue 29): read
	// from its state, where only it keeps its seed.
	keys := func(n string) (private, public string) {
		seed, err := os.ReadFile(filepath.Join(roots[n]+".state", declaration.NodeSeedFile))
		m.Must(err)
		kp, err := nkeys.FromSeed(seed)
		m.Must(err)
		private, public, err = declaration.OverlayKey(kp)
		m.Must(err)
		return private, public
	}
	// The network is in what each node was sent, not only in its files:
	// every node current with what it would be sent now.
	for n, st := range m.Status() {
		if st.State != wire.StateCurrent {
			t.Fatalf("%s is %s after the push: %s", n, st.State, st.Detail)
		}
	}
	hub, edge := view("hub"), view("edge-1")
	if hub.Address != "10.50.0.1" || edge.Address != "10.50.0.2" {
		t.Fatalf("addresses: hub %q, edge-1 %q", hub.Address, edge.Address)
	}
	hubPrivate, hubPublic := keys("hub")
	_, edgePublic := keys("edge-1")
	if got := wg("hub"); !strings.Contains(got, "Address = 10.50.0.1\nPrivateKey = "+hubPrivate+"\n") ||
		!strings.Contains(got, "# edge-1\nPublicKey = "+edgePublic+"\nAllowedIPs = 10.50.0.2/32") {
		t.Fatalf("hub's WireGuard file:\n%s", got)
	}
	if got := wg("edge-1"); !strings.Contains(got, "# hub\nPublicKey = "+hubPublic+"\nAllowedIPs = 10.50.0.1/32") {
		t.Fatalf("edge-1's WireGuard file:\n%s", got)
	}
	if b, _ := os.ReadFile(filepath.Join(roots["edge-1"], "etc/cli.conf")); string(b) != "server = 10.50.0.1:7000\n" {
		t.Fatalf("edge-1's cli.conf: %q", b)
	}

	// A new consumer: the hub's peers grow on the next push.
	start("edge-2", "cli")
	pushAll()
	_, edge2Public := keys("edge-2")
	if got := wg("hub"); !strings.Contains(got, "# edge-2\nPublicKey = "+edge2Public+"\nAllowedIPs = 10.50.0.3/32") {
		t.Fatalf("hub's WireGuard file after edge-2 joined:\n%s", got)
	}
	if got := wg("edge-2"); strings.Contains(got, "edge-1") {
		t.Fatalf("edge-2 lists edge-1, which it neither receives from nor serves:\n%s", got)
	}
	// The private keys travel sealed: the log never holds one in clear.
	m.Must(m.H.Core.Store.Read(m.Ctx, store.ReadOptions{Filter: events.SubjectsEvents}, func(msg store.Msg) error {
		if strings.Contains(string(msg.Data), hubPrivate) {
			t.Fatalf("event %d holds hub's private overlay key in clear", msg.Seq)
		}
		return nil
	}))
	m.Verified()
}
