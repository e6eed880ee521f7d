package declaration

import (
	"fmt"
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
		} {
			if got := c.Check(tc.key, tc.subject, tc.data, tc.got); got != tc.want || CheckMAC(tc.key, tc.subject, tc.data, tc.got) != tc.want {
				t.Errorf("check %q of %s under key %x: %v, want %v", tc.got, tc.subject, tc.key[:4], got, tc.want)
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

// A checker keeps a bounded number of keyed hashes however many nodes'
// keys it meets (one per node at 100,000 nodes was 129 MB of heap), and
// answers rightly after starting over.
func TestMACCheckerStaysBounded(t *testing.T) {
	kp, _ := nkeys.CreateAccount()
	k, err := NewKeyring(kp)
	if err != nil {
		t.Fatal(err)
	}
	var c MACChecker
	data := []byte(`{"x":1}`)
	for i := range maxCheckerKeys + 10 {
		node := fmt.Sprintf("n-%d", i)
		subject := "mesh.rp." + node + ".DeclarationApplied"
		if !c.Check(k.NodeMAC(node), subject, data, MAC(k.NodeMAC(node), subject, data)) {
			t.Fatalf("the MAC of %s did not check", node)
		}
		if len(c.hashes) > maxCheckerKeys {
			t.Fatalf("the checker keeps %d keyed hashes, over its bound of %d", len(c.hashes), maxCheckerKeys)
		}
	}
	if len(c.hashes) >= maxCheckerKeys {
		t.Fatalf("the checker did not start over past its bound: it keeps %d", len(c.hashes))
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
