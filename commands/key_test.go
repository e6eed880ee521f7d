package commands_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meshctl/mesh/commands"
	"github.com/meshctl/mesh/embedded/embeddedtest"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/events/store"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"
)

// A controller that cannot sign fails at its start, in one sentence.
func TestControllerKeyRefusals(t *testing.T) {
	t.Parallel()
	srv := embeddedtest.Server(t)
	start := func(home string) error {
		c, err := commands.StartController(context.Background(), embeddedtest.Conn(t, srv), commands.ControllerConfig{Home: home})
		if err == nil {
			c.Close()
		}
		return err
	}
	home := t.TempDir()
	if err := start(home); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(home, commands.KeyFile)
	if info, _ := os.Stat(path); info.Mode().Perm() != 0o600 {
		t.Fatalf("key created with mode %o", info.Mode().Perm())
	}
	if err := start(home); err != nil {
		t.Fatalf("restart with its own key: %v", err)
	}
	os.Chmod(path, 0o644)
	if err := start(home); err == nil || !strings.Contains(err.Error(), "readable by others") {
		t.Fatalf("key readable by others: %v", err)
	}
	os.Chmod(path, 0o600)
	if err := start(t.TempDir()); err == nil || !strings.Contains(err.Error(), "is missing, but this mesh signs with") {
		t.Fatalf("a home without the key the mesh signs with: %v", err)
	}
	if err := start(strangerHome(t)); err == nil || !strings.Contains(err.Error(), "but this mesh signs with") {
		t.Fatalf("a home with another key: %v", err)
	}
	other := t.TempDir()
	os.WriteFile(filepath.Join(other, commands.KeyFile), []byte("SAAGARBAGE"), 0o600)
	if err := start(other); err == nil || !strings.Contains(err.Error(), "not an nkeys seed") {
		t.Fatalf("an unreadable key: %v", err)
	}
}

// The record of the controller key is found past a message on its subject
// that is none (an open bus lets anyone write there): before it, the first
// start records the key after the stray one; after it, a restart still
// signs with the recorded key and a stranger's key is still refused.
func TestTheControllerKeyRecordIsFoundPastStrayMessages(t *testing.T) {
	t.Parallel()
	srv := embeddedtest.Server(t)
	ctx := context.Background()
	if _, _, err := store.Open(ctx, embeddedtest.Conn(t, srv), store.StreamConfig{}); err != nil {
		t.Fatal(err)
	}
	stray := func() {
		t.Helper()
		js, err := jetstream.New(embeddedtest.Conn(t, srv))
		if err != nil {
			t.Fatal(err)
		}
		subject := events.ControllerAggregate().Subject(events.ControllerKeyRecorded{}.EventType())
		if _, err := js.Publish(ctx, subject, []byte(`{"not":"a record"}`)); err != nil {
			t.Fatal(err)
		}
	}
	start := func(home string) error {
		c, err := commands.StartController(ctx, embeddedtest.Conn(t, srv), commands.ControllerConfig{Home: home, OpenBus: true})
		if err == nil {
			c.Close()
		}
		return err
	}
	stray()
	home := t.TempDir()
	if err := start(home); err != nil {
		t.Fatalf("the first start, a stray message on the record's subject before it: %v", err)
	}
	stray()
	if err := start(home); err != nil {
		t.Fatalf("a restart, stray messages before and after the record: %v", err)
	}
	if err := start(strangerHome(t)); err == nil || !strings.Contains(err.Error(), "but this mesh signs with") {
		t.Fatalf("a home with another key: %v", err)
	}
}

// strangerHome is a home holding a controller key of its own, not the
// mesh's.
func strangerHome(t *testing.T) string {
	t.Helper()
	home := t.TempDir()
	kp, _ := nkeys.CreateAccount()
	seed, _ := kp.Seed()
	if err := os.WriteFile(filepath.Join(home, commands.KeyFile), seed, 0o600); err != nil {
		t.Fatal(err)
	}
	return home
}
