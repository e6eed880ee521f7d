package busauth

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/nats-io/nkeys"
)

// The controller's HTTP listener off loopback (issue 29) asks for the
// operator's credential: a bearer token derived from the operator's key,
// so whoever holds operator.nk (and nobody else) can make it (mesh
// http-token prints it), the controller derives the same from its own
// key, and there is nothing more to store, back up or keep in step.

// HTTPToken is the bearer token of operator on the controller's HTTP
// listener.
func HTTPToken(operator nkeys.KeyPair) (string, error) {
	seed, err := operator.Seed()
	if err != nil {
		return "", err
	}
	mac := hmac.New(sha256.New, seed)
	mac.Write([]byte("mesh http bearer token v1"))
	return "mesh-" + base64.RawURLEncoding.EncodeToString(mac.Sum(nil)), nil
}

// ControllerHTTPToken is the token the controller holding controller
// checks: the operator's, derived as the operator's key is.
func ControllerHTTPToken(controller nkeys.KeyPair) (string, error) {
	op, err := OperatorKey(controller)
	if err != nil {
		return "", err
	}
	return HTTPToken(op)
}

// HomeHTTPToken is the token of the operator key in home.
func HomeHTTPToken(home string) (string, error) {
	path := filepath.Join(home, OperatorKeyFile)
	seed, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("the home %s holds no operator key (%s): give the --home of the mesh up or mesh serve that runs the listener", home, OperatorKeyFile)
	}
	if err != nil {
		return "", fmt.Errorf("cannot read the operator key: %w", err)
	}
	kp, err := nkeys.FromSeed(seed)
	if err != nil {
		return "", fmt.Errorf("the operator key %s is not an nkeys seed: %v; mesh up writes it again", path, err)
	}
	return HTTPToken(kp)
}
