package busauth

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nkeys"
)

// Identities are derived, so a controller restored from its key (or a
// second one sharing it) knows every node's join string: the same name
// gives the same key, another name or the operator another one. Fails when
// a derivation takes randomness or ignores the name.
func TestIdentitiesAreDerivedFromTheControllerKey(t *testing.T) {
	controller, _ := nkeys.CreateAccount()
	pub := func(kp nkeys.KeyPair, err error) string {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		p, _ := kp.PublicKey()
		return p
	}
	web1, again, web2 := pub(NodeKey(controller, "web-1")), pub(NodeKey(controller, "web-1")), pub(NodeKey(controller, "web-2"))
	op := pub(OperatorKey(controller))
	if web1 != again || web1 == web2 || op == web1 || !strings.HasPrefix(web1, "U") {
		t.Fatalf("web-1 %s and again %s, web-2 %s, operator %s", web1, again, web2, op)
	}
	other, _ := nkeys.CreateAccount()
	if pub(NodeKey(other, "web-1")) == web1 {
		t.Fatal("another controller key gives web-1 the same identity")
	}
	k1, _ := ClusterBusKeys(controller)
	k2, _ := ClusterBusKeys(controller)
	issuer, user := k1.Public()
	if i2, u2 := k2.Public(); i2 != issuer || u2 != user {
		t.Fatal("a closed cluster's keys differ between two derivations: its configuration would go stale")
	}
	if cfg := k1.ServerConfig(); !strings.Contains(cfg, "issuer: "+issuer) || strings.Count(cfg, user) != 2 {
		t.Fatalf("the server configuration does not name the issuer and the controller's user:\n%s", cfg)
	}
}

// A connection proves its key by signing the server's nonce; either
// base64 the clients send is read, and nothing else passes.
func TestSignedNonce(t *testing.T) {
	kp, _ := nkeys.CreateUser()
	other, _ := nkeys.CreateUser()
	pub, _ := kp.PublicKey()
	nonce := "a-nonce-from-the-server"
	sig, _ := kp.Sign([]byte(nonce))
	forged, _ := other.Sign([]byte(nonce))
	for _, tc := range []struct {
		pub, nonce, sig string
		want            bool
	}{
		{pub, nonce, base64.RawURLEncoding.EncodeToString(sig), true},
		{pub, nonce, base64.StdEncoding.EncodeToString(sig), true},
		{pub, nonce, base64.RawURLEncoding.EncodeToString(forged), false},
		{pub, "another nonce", base64.RawURLEncoding.EncodeToString(sig), false},
		{pub, "", base64.RawURLEncoding.EncodeToString(sig), false},
		{pub, nonce, "not base64!", false},
		{"not a key", nonce, base64.RawURLEncoding.EncodeToString(sig), false},
	} {
		if got := signedNonce(tc.pub, tc.nonce, tc.sig); got != tc.want {
			t.Errorf("signedNonce(%.8s, %q, %.12s) = %v, want %v", tc.pub, tc.nonce, tc.sig, got, tc.want)
		}
	}
}

// The controller key in a home: made once, mode 0600; refused in one
// sentence when others can read it, when it is not a seed, or when it is
// missing and may not be made. The operator key beside it connects the
// command line; a home without one asks nothing.
func TestHomeKeys(t *testing.T) {
	home := t.TempDir()
	if _, err := HomeKey(home, false); err == nil || !strings.Contains(err.Error(), "mesh bus-config creates it") {
		t.Fatalf("a missing key, not to be made: %v", err)
	}
	kp, err := HomeKey(home, true)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(home, KeyFile)
	if info, _ := os.Stat(path); info.Mode().Perm() != 0o600 {
		t.Fatalf("key made with mode %o", info.Mode().Perm())
	}
	again, err := HomeKey(home, true)
	if a, _ := again.PublicKey(); err != nil || a != must(kp.PublicKey()) {
		t.Fatalf("the key read again is another (%v)", err)
	}
	os.Chmod(path, 0o644)
	if _, err := HomeKey(home, false); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("a key readable by others: %v", err)
	}
	os.Chmod(path, 0o600)
	os.WriteFile(path, []byte("junk"), 0o600)
	if _, err := HomeKey(home, false); err == nil || !strings.Contains(err.Error(), "not an nkeys seed") {
		t.Fatalf("a key that is not one: %v", err)
	}

	if opts, err := OperatorOptions(home); err != nil || opts != nil {
		t.Fatalf("a home without an operator key asks for nothing: %v, %d option(s)", err, len(opts))
	}
	if err := WriteOperatorKey(home, kp); err != nil {
		t.Fatal(err)
	}
	if info, _ := os.Stat(filepath.Join(home, OperatorKeyFile)); info.Mode().Perm() != 0o600 {
		t.Fatalf("operator key written with mode %o", info.Mode().Perm())
	}
	// Its key, and its own inbox: the only answers its grant lets it hear.
	if opts, err := OperatorOptions(home); err != nil || len(opts) != 2 {
		t.Fatalf("the operator key written: %v, %d option(s)", err, len(opts))
	}
	os.Chmod(filepath.Join(home, OperatorKeyFile), 0o644)
	if _, err := OperatorOptions(home); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("an operator key readable by others: %v", err)
	}
	os.WriteFile(filepath.Join(home, OperatorKeyFile), []byte("junk"), 0o600)
	os.Chmod(filepath.Join(home, OperatorKeyFile), 0o600)
	if _, err := OperatorOptions(home); err == nil || !strings.Contains(err.Error(), "mesh up writes the home's again") {
		t.Fatalf("an operator key that is not one: %v", err)
	}
}

func must(s string, err error) string {
	if err != nil {
		panic(err)
	}
	return s
}
