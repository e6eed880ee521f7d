package projections

import (
	"github.com/meshctl/mesh/declaration"
	"github.com/meshctl/mesh/events/store"
	"github.com/nats-io/nkeys"
)

// testKeys are the controller keys of every test stream here: a store
// appends with its MAC, an engine folds with it, as a controller does.
var testKeys = func() *declaration.Keyring {
	kp, err := nkeys.CreateAccount()
	if err != nil {
		panic(err)
	}
	k, err := declaration.NewKeyring(kp)
	if err != nil {
		panic(err)
	}
	return k
}()

// keyed makes s append as the test controller does.
func keyed(s *store.Store) *store.Store {
	s.MAC = testKeys.LogMAC()
	return s
}
