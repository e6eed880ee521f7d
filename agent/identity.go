package agent

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/meshctl/mesh/declaration"
	"github.com/meshctl/mesh/events"
	"github.com/nats-io/nkeys"
)

// The environment a module's program runs in (issue 15):
//
//	MESH_MESH, MESH_NODE, MESH_MODULE  where it runs
//	MESH_ROOT                          the node's root (declared paths land under it)
//	MESH_NATS_URL                      the bus
//	MESH_USER, MESH_NKEY, MESH_INBOX   its own identity on a closed bus: the user name
//	                                   NODE/MODULE, the file of its key (mode 0600, its
//	                                   own), and the inbox prefix its replies come to
//	MESH_STATE                         its module's key-value bucket of state, shared by
//	                                   its instances on every node
//	MESH_STATE_PREFIX                  the start of the keys of it this instance owns
//	                                   ("NODE."): the bus refuses it any other key
//	MESH_TLS_CA                        the bus's CA, when it speaks TLS
//
// The key is derived from the node's, so no new secret travels: the join
// string stays the only secret a machine is given. The module's package
// meshmod connects with these.
//
// The keys live beside the state directory, not in it: the state is the
// agent's alone (0700), while a program run as another user must reach
// its own key, so their directory may be passed through (0711) but not
// listed, and each key is readable by its program's user only.
const modulesSuffix = ".modules"

// runtimeEnv is what module's program is given, and the file of its key
// ("" on an open bus, whose join string holds no key).
func (a *Agent) runtimeEnv(module string) ([]string, string, error) {
	j := a.cfg.Join
	env := []string{"PATH=" + os.Getenv("PATH"), "MESH_MESH=" + j.Mesh, "MESH_NODE=" + j.Node, "MESH_MODULE=" + module,
		"MESH_ROOT=" + a.cfg.Root, "MESH_NATS_URL=" + j.Bus, "MESH_STATE=" + events.StateBucket(module),
		"MESH_STATE_PREFIX=" + events.StatePrefix(j.Node)}
	if j.CA != "" {
		// The bus speaks TLS: the program trusts the CA its agent does.
		ca := filepath.Clean(a.cfg.State) + modulesSuffix + "/ca.pem"
		if err := os.MkdirAll(filepath.Dir(ca), 0o711); err != nil {
			return nil, "", err
		}
		if err := os.WriteFile(ca, []byte(j.CA), 0o644); err != nil {
			return nil, "", fmt.Errorf("cannot give %s the bus's CA: %w", module, err)
		}
		env = append(env, "MESH_TLS_CA="+ca)
	}
	if j.Seed == "" {
		return env, "", nil
	}
	bus, err := nkeys.FromSeed([]byte(j.Seed))
	if err != nil {
		return nil, "", errors.New("the join string has no usable node key")
	}
	kp, err := declaration.ModuleKey(bus, module)
	if err != nil {
		return nil, "", err
	}
	seed, _ := kp.Seed()
	dir := filepath.Clean(a.cfg.State) + modulesSuffix
	if err := os.MkdirAll(dir, 0o711); err != nil {
		return nil, "", fmt.Errorf("cannot keep %s's key: %w", module, err)
	}
	if err := os.Chmod(dir, 0o711); err != nil {
		return nil, "", fmt.Errorf("cannot keep %s's key: %w", module, err)
	}
	file := filepath.Join(dir, module+".nk")
	if err := os.WriteFile(file, seed, 0o600); err != nil {
		return nil, "", fmt.Errorf("cannot keep %s's key: %w", module, err)
	}
	env = append(env, "MESH_USER="+events.ModuleUser(j.Node, module), "MESH_NKEY="+file, "MESH_INBOX="+events.ModuleInbox(j.Node, module))
	if j.own {
		// The controller cannot derive this key from its own: the node's
		// bus key vouches for it (declaration.Voucher).
		pub, _ := kp.PublicKey()
		voucher, err := declaration.Voucher(bus, j.Node, module, pub)
		if err != nil {
			return nil, "", err
		}
		env = append(env, "MESH_VOUCHER="+voucher)
	}
	return env, file, nil
}
