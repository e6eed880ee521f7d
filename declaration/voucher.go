package declaration

import (
	"encoding/base64"

	"github.com/nats-io/nkeys"
)

// A module's identity on a node that made its own keys (issue 29) is a key
// its agent derives from the node's seed (ModuleKey), which the controller
// cannot derive. The agent vouches for it instead: its bus key signs the
// module's user name and public key. The bus's callout checks the voucher
// against the node's recorded bus key when the module connects, and the
// fold when the module reports a standing; nothing is recorded per module.

func voucherBytes(node, module, key string) []byte {
	return []byte("mesh module identity\x00" + node + "\x00" + module + "\x00" + key)
}

// Voucher is node's bus key's signature of module's public key.
func Voucher(bus nkeys.KeyPair, node, module, key string) (string, error) {
	sig, err := bus.Sign(voucherBytes(node, module, key))
	if err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(sig), nil
}

// CheckVoucher reports whether voucher is the signature, by the node's
// public bus key, of module's key on node.
func CheckVoucher(bus, node, module, key, voucher string) bool {
	if bus == "" || key == "" || voucher == "" {
		return false
	}
	kp, err := nkeys.FromPublicKey(bus)
	if err != nil {
		return false
	}
	sig, err := base64.RawURLEncoding.DecodeString(voucher)
	return err == nil && kp.Verify(voucherBytes(node, module, key), sig) == nil
}
