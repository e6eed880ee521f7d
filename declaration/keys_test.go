package declaration

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/nats-io/nkeys"
)

// A MAC holds to its key, its subject and its data, and a checker that
// keeps its keyed hashes answers as a fresh one would, key after key.
func TestMACHoldsToKeySubjectAndData(t *testing.T) {
	kp, _ := nkeys.CreateAccount()
	k, err := NewKeyring(kp)
	if err != nil {
		t.Fatal(err)
	}
	log, web := k.LogMAC(), k.NodeMAC("web-1")
	if string(log) == string(web) || string(web) == string(k.NodeMAC("web-2")) {
		t.Fatal("two derived keys are equal")
	}
	data := []byte(`{"x":1}`)
	mac := MAC(web, "mesh.rp.web-1.DeclarationApplied", data)
	var c MACChecker
	for range 3 {
		for _, tc := range []struct {
			key     []byte
			subject string
			data    []byte
			got     string
			want    bool
		}{
			{web, "mesh.rp.web-1.DeclarationApplied", data, mac, true},
			{log, "mesh.rp.web-1.DeclarationApplied", data, mac, false},
			{web, "mesh.rp.web-2.DeclarationApplied", data, mac, false},
			{web, "mesh.rp.web-1.DeclarationApplied", []byte(`{"x":2}`), mac, false},
			{web, "mesh.rp.web-1.DeclarationApplied", data, "", false},
			{web, "mesh.rp.web-1.DeclarationApplied", data, "not base64!", false},
			{web, "mesh.rp.web-1.DeclarationApplied", data, mac[:20], false},
			{web, "mesh.rp.web-1.DeclarationApplied", data, strings.Repeat("A", 200), false},
			{web, "mesh.rp.web-1.DeclarationApplied", data, mac + mac, false},
			{nil, "mesh.rp.web-1.DeclarationApplied", data, mac, false},
			// No key is no MAC, even one made with no key.
			{nil, "mesh.rp.web-1.DeclarationApplied", data, MAC(nil, "mesh.rp.web-1.DeclarationApplied", data), false},
		} {
			if got := c.Check(tc.key, tc.subject, tc.data, tc.got); got != tc.want || CheckMAC(tc.key, tc.subject, tc.data, tc.got) != tc.want {
				t.Errorf("check %.20q of %s under key %.4x: %v, want %v", tc.got, tc.subject, tc.key, got, tc.want)
			}
		}
	}
	// The node's MAC key is the one its agent derives from its join seed.
	bus, _ := DeriveKey(kp, NodeLabel("web-1"), nkeys.PrefixByteUser)
	agent, _ := ReportMACKey(bus)
	if string(agent) != string(web) {
		t.Fatal("the agent's report MAC key is not the controller's for it")
	}
	if pub, _ := bus.PublicKey(); pub != k.NodeBus("web-1") {
		t.Fatal("the keyring's bus key of web-1 is not its join key")
	}
}

// MACs kept for one key make the MAC a fresh keyed hash makes, message
// after message and from several goroutines at once: a hash reset wrongly
// (or shared between two appends) would make MACs the fold sets aside.
func TestMACsOfOneKeyAreTheMACsOfAFreshHash(t *testing.T) {
	t.Parallel()
	kp, _ := nkeys.CreateAccount()
	k, err := NewKeyring(kp)
	if err != nil {
		t.Fatal(err)
	}
	m := NewMACs(k.LogMAC())
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 200 {
				subject, data := fmt.Sprintf("mesh.ev.node.web-%d.DeclarationSent", g), []byte(strings.Repeat("x", i))
				if got, want := m.MAC(subject, data), MAC(k.LogMAC(), subject, data); got != want {
					t.Errorf("MAC %d of goroutine %d: %s, want %s", i, g, got, want)
					return
				}
			}
		})
	}
	wg.Wait()
	if string(m.Key()) != string(k.LogMAC()) {
		t.Fatal("MACs do not say their key")
	}
}

// A checker keeps a bounded number of keyed hashes however many nodes'
// keys it meets (one per node at 100,000 nodes was 129 MB of heap), keeps
// them past the bound rather than starting over, and answers rightly for
// the keys it keeps and those past its bound: a right MAC checks, a MAC
// under another node's key or of other data does not.
func TestMACCheckerStaysBounded(t *testing.T) {
	kp, _ := nkeys.CreateAccount()
	k, err := NewKeyring(kp)
	if err != nil {
		t.Fatal(err)
	}
	var c MACChecker
	data := []byte(`{"x":1}`)
	for round := range 2 {
		for i := range maxCheckerKeys + 10 {
			node := fmt.Sprintf("n-%d", i)
			subject := "mesh.rp." + node + ".DeclarationApplied"
			if !c.Check(k.NodeMAC(node), subject, data, MAC(k.NodeMAC(node), subject, data)) {
				t.Fatalf("round %d: the MAC of %s did not check", round, node)
			}
			if c.Check(k.NodeMAC(node), subject, data, MAC(k.NodeMAC("other"), subject, data)) ||
				c.Check(k.NodeMAC(node), subject, []byte(`{"x":2}`), MAC(k.NodeMAC(node), subject, data)) {
				t.Fatalf("round %d: a MAC of another key or other data checked for %s", round, node)
			}
			if len(c.hashes) > maxCheckerKeys {
				t.Fatalf("the checker keeps %d keyed hashes, over its bound of %d", len(c.hashes), maxCheckerKeys)
			}
		}
	}
	if len(c.hashes) != maxCheckerKeys {
		t.Fatalf("the checker keeps %d keyed hashes past its bound, not the %d it kept first", len(c.hashes), maxCheckerKeys)
	}
}

// A module's identity is the same whether its agent derives it from the
// join string's seed or the controller from its own key, and its standing
// MAC key is the one ReportMACKey gives the module's key.
func TestModuleKeyIsDerivedAlikeAtBothEnds(t *testing.T) {
	ctrl, _ := nkeys.CreateAccount()
	k, err := NewKeyring(ctrl)
	if err != nil {
		t.Fatal(err)
	}
	bus, err := DeriveKey(ctrl, NodeLabel("db-1"), nkeys.PrefixByteUser)
	if err != nil {
		t.Fatal(err)
	}
	mod, err := ModuleKey(bus, "greeter")
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := mod.PublicKey()
	mac, _ := ReportMACKey(mod)
	gotPub, gotMAC := k.Module("db-1", "greeter")
	if pub != gotPub || string(mac) != string(gotMAC) {
		t.Fatalf("the agent derives %s, the controller %s (MACs equal: %v)", pub, gotPub, string(mac) == string(gotMAC))
	}
	if other, _ := k.Module("db-1", "other"); other == pub {
		t.Fatal("two modules on a node share an identity")
	}
	if busPub, _ := bus.PublicKey(); busPub == pub {
		t.Fatal("a module's identity is its node's")
	}
}

// BenchmarkMAC is the MAC of a declaration's append (1,600 bytes, as a
// DeclarationSent of one file is) made with a fresh keyed hash, as every
// append made it, beside one kept by MACs, as the store makes it now.
func BenchmarkMAC(b *testing.B) {
	key := make([]byte, 32)
	data := []byte(strings.Repeat("d", 1600))
	const subject = "mesh.ev.node.web-1.DeclarationSent"
	b.Run("fresh", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			MAC(key, subject, data)
		}
	})
	b.Run("kept", func(b *testing.B) {
		m := NewMACs(key)
		b.ReportAllocs()
		for b.Loop() {
			m.MAC(subject, data)
		}
	})
	// The fold's check of every message's MAC, a decoding worker's checker.
	b.Run("check", func(b *testing.B) {
		var c MACChecker
		mac := MAC(key, subject, data)
		b.ReportAllocs()
		for b.Loop() {
			if !c.Check(key, subject, data, mac) {
				b.Fatal("the MAC does not check")
			}
		}
	})
	// A report's check in a fleet larger than the checker keeps keyed
	// hashes for (10,000 nodes, each key in turn): each past the bound is
	// checked by hand.
	b.Run("check-fleet", func(b *testing.B) {
		var c MACChecker
		const fleet = 10_000
		keys, macs := make([][]byte, fleet), make([]string, fleet)
		for i := range fleet {
			keys[i] = []byte(fmt.Sprintf("%032d", i))
			macs[i] = MAC(keys[i], subject, data[:420])
		}
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if !c.Check(keys[i], subject, data[:420], macs[i]) {
				b.Fatal("the MAC does not check")
			}
			i = (i + 1) % fleet
		}
	})
}
