// Package foldtest holds what the tests of the read models' parts
// share: a controller's keys, and a stream on a real embedded bus that
// appends as that controller does, so the fold takes its events as the
// controller's (rule 19). It is for tests alone.
package foldtest

import (
	"context"
	"testing"

	"github.com/meshctl/mesh/declaration"
	"github.com/meshctl/mesh/embedded/embeddedtest"
	"github.com/meshctl/mesh/events/store"
	"github.com/nats-io/nkeys"
)

// Keys makes a fresh controller's keys.
func Keys(t testing.TB) *declaration.Keyring {
	t.Helper()
	kp, err := nkeys.CreateAccount()
	if err != nil {
		t.Fatal(err)
	}
	keys, err := declaration.NewKeyring(kp)
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// Stream opens the stream on an embedded server of its own, appending as
// the controller with keys does.
func Stream(t testing.TB, keys *declaration.Keyring) *store.Store {
	t.Helper()
	s, _, err := store.Open(context.Background(), embeddedtest.Conn(t, embeddedtest.Server(t)), store.StreamConfig{})
	if err != nil {
		t.Fatal(err)
	}
	s.MAC = keys.LogMAC()
	return s
}
