package busauth

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/meshctl/mesh/declaration"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
)

// OperatorKeyFile holds, in the home, the operator's identity on a closed
// bus: what the command line (and the nats CLI, with --nkey) connects with.
const OperatorKeyFile = "operator.nk"

// NodeKey is the identity on a closed bus of a node enrolled before agents
// made their own keys (issue 29), until it is re-keyed. Derived, not
// random: a controller restored from a backup of its key recognises such a
// node's join string, and so does a second controller sharing the key.
func NodeKey(controller nkeys.KeyPair, node string) (nkeys.KeyPair, error) {
	return declaration.DeriveKey(controller, declaration.NodeLabel(node), nkeys.PrefixByteUser)
}

// OperatorKey is the operator's identity on a closed bus.
func OperatorKey(controller nkeys.KeyPair) (nkeys.KeyPair, error) {
	return declaration.DeriveKey(controller, "operator", nkeys.PrefixByteUser)
}

// KeyFile is the controller's signing key in its home: an nkeys seed, mode 0600.
const KeyFile = "controller.nk"

// HomeKey reads the controller key in home, creating it when create is set
// and there is none: for what must know the key before the controller
// starts (a closed cluster's configuration names keys derived from it).
// The controller's start still holds it to the key the log records.
func HomeKey(home string, create bool) (nkeys.KeyPair, error) {
	path := filepath.Join(home, KeyFile)
	kp, err := readKey(path, "controller key")
	if errors.Is(err, fs.ErrNotExist) && create {
		return createKey(path)
	}
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("there is no controller key in %s; mesh bus-config creates it (and prints the cluster's configuration), or restore it from a backup: %w", path, err)
	}
	return kp, err
}

// readKey reads the key (what: "controller key") in the file at path: an
// nkeys seed, in a file no one else may read.
func readKey(path, what string) (nkeys.KeyPair, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if info.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("the %s %s is readable by others (mode %04o); chmod 600 it", what, path, info.Mode().Perm())
	}
	seed, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cannot read the %s %s: %v", what, path, err)
	}
	kp, err := nkeys.FromSeed(bytes.TrimSpace(seed))
	if err != nil {
		return nil, fmt.Errorf("the %s %s is not an nkeys seed: %v", what, path, err)
	}
	return kp, nil
}

func createKey(path string) (nkeys.KeyPair, error) {
	kp, err := nkeys.CreateAccount()
	if err != nil {
		return nil, fmt.Errorf("cannot create the controller key: %w", err)
	}
	if err := declaration.WriteNewKey(path, kp); err != nil {
		return nil, fmt.Errorf("cannot create the controller key %s: %v", path, err)
	}
	return kp, nil
}

// BusKeys are what a closed bus is started with: the issuer of the callout's
// answers and the controller's own user. Made afresh at each start: only
// the controller holds them, and nothing outside the process needs them.
type BusKeys struct {
	Issuer, Controller nkeys.KeyPair
}

// NewBusKeys makes a closed bus's keys.
func NewBusKeys() (BusKeys, error) {
	issuer, err := nkeys.CreateAccount()
	if err != nil {
		return BusKeys{}, err
	}
	user, err := nkeys.CreateUser()
	return BusKeys{Issuer: issuer, Controller: user}, err
}

// ClusterBusKeys are a closed cluster's keys: derived from the controller
// key, because the cluster's configuration names them and outlives any one
// start of the controller (mesh bus-config prints that configuration).
func ClusterBusKeys(controller nkeys.KeyPair) (BusKeys, error) {
	issuer, err := declaration.DeriveKey(controller, "callout issuer", nkeys.PrefixByteAccount)
	if err != nil {
		return BusKeys{}, err
	}
	user, err := declaration.DeriveKey(controller, "controller user", nkeys.PrefixByteUser)
	return BusKeys{Issuer: issuer, Controller: user}, err
}

// ServerConfig is the authorization block of a nats-server configuration
// that closes a bus with these keys: the controller's user may do anything
// and answers the callout; every other connection is the controller's to
// decide, waiting for its answer as long as the embedded bus does
// (embedded.AuthTimeout, ten seconds; the server's own default is two,
// which a loaded controller passed).
func (k BusKeys) ServerConfig() string {
	issuer, controller := k.Public()
	return fmt.Sprintf(`authorization {
  timeout: 10
  users: [ { nkey: %s } ]
  auth_callout {
    issuer: %s
    auth_users: [ %s ]
  }
}
`, controller, issuer, controller)
}

// Public is what a server closed for these keys is configured with: the
// account key the callout's answers are signed with, and the controller's
// user key, which connects without the callout. (An embedded server takes
// them as embedded.Auth; the controller itself never needs the server.)
func (k BusKeys) Public() (issuer, controller string) {
	issuer, _ = k.Issuer.PublicKey()
	controller, _ = k.Controller.PublicKey()
	return issuer, controller
}

// ControllerOption connects as the controller's own user.
func (k BusKeys) ControllerOption() nats.Option {
	user, _ := k.Controller.PublicKey()
	return nats.Nkey(user, k.Controller.Sign)
}

// WriteOperatorKey writes the operator's key into home, mode 0600, replacing
// what is there: it is derived, so it is the same key each time.
func WriteOperatorKey(home string, controller nkeys.KeyPair) error {
	op, err := OperatorKey(controller)
	if err != nil {
		return err
	}
	seed, err := op.Seed()
	if err != nil {
		return err
	}
	path := filepath.Join(home, OperatorKeyFile)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, seed, 0o600); err != nil {
		return fmt.Errorf("cannot write the operator key %s: %w", path, err)
	}
	return os.Rename(tmp, path)
}

// OperatorOptions connect with the operator key in home, if there is one:
// a home without one belongs to an open bus, which asks for nothing.
func OperatorOptions(home string) ([]nats.Option, error) {
	path := filepath.Join(home, OperatorKeyFile)
	kp, err := ReadOperatorKey(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%w; mesh up writes the home's again", err)
	}
	return KeyOptions(kp), nil
}
