package secret

import (
	"errors"
	"testing"
)

// A box opens only with its key at its place, and the same value sealed
// twice is two boxes (no reader can tell two equal secrets apart).
func TestSealOpensOnlyWithItsKeyAtItsPlace(t *testing.T) {
	key, other := []byte("k1"), []byte("k2")
	box := Seal(key, Where("file", "db-1", "/etc/x"), []byte("s3cret"))
	if got, err := Open(key, Where("file", "db-1", "/etc/x"), box); err != nil || string(got) != "s3cret" {
		t.Fatalf("open: %q %v", got, err)
	}
	for name, try := range map[string]func() error{
		"another key":  func() error { _, err := Open(other, Where("file", "db-1", "/etc/x"), box); return err },
		"another node": func() error { _, err := Open(key, Where("file", "db-2", "/etc/x"), box); return err },
		"changed box":  func() error { _, err := Open(key, Where("file", "db-1", "/etc/x"), box[:len(box)-2]+"AA"); return err },
	} {
		if err := try(); !errors.Is(err, ErrOpen) {
			t.Errorf("%s: err = %v, want ErrOpen", name, err)
		}
	}
	if Seal(key, "p", []byte("v")) == Seal(key, "p", []byte("v")) {
		t.Fatal("two seals of one value are the same box")
	}
}

func TestSealedSettingRoundTrips(t *testing.T) {
	s := Setting{Version: 3, Key: "abc", Box: "Zm9v"}
	got, err := ParseSetting(s.String())
	if err != nil || got != s || !IsSealed(s.String()) || Shown(s.String()) != "(secret, version 3)" {
		t.Fatalf("%q -> %+v %v", s.String(), got, err)
	}
	if Shown("plain") != "plain" || IsSealed("plain") {
		t.Fatal("a clear value read as sealed")
	}
	if Mint([]byte("k"), "a", "b") == Mint([]byte("k"), "a", "c") || len(Mint([]byte("k"), "a")) != 32 {
		t.Fatal("mint does not depend on its names, or is not 32 characters")
	}
}
