package projections

import (
	"net/netip"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/meshctl/mesh/events"
)

// The overlay's read model (issue 18): the range, every address not free
// (held, or given back and quarantined), and each node's address. The
// address pool aggregate is read back from it, expecting Version.

// Network is the overlay's range as last set, and the pool's version: the
// sequence of its aggregate's last event.
type Network struct {
	CIDR              string `json:"cidr"`
	QuarantineSeconds int    `json:"quarantine_seconds"`
	Version           uint64 `json:"version"`
}

var keyNetwork = []byte{prefixNetwork, 'm'}

// addressKey orders addresses numerically: 16 bytes, IPv4 as mapped.
func addressKey(a string) []byte {
	addr, err := netip.ParseAddr(a)
	if err != nil {
		return append([]byte{prefixNetwork, 'a'}, a...)
	}
	b := addr.As16()
	return append([]byte{prefixNetwork, 'a'}, b[:]...)
}

func nodeAddressKey(node string) []byte { return append([]byte{prefixNodeAddress}, node...) }

// foldNetwork keeps the pool's rows.
func foldNetwork(b *pebble.Batch, rec events.Recorded) error {
	at := rec.Envelope.OccurredAt
	switch rec.Event.(type) {
	case events.NetworkSet, events.AddressesAllotted, events.AddressesReleased:
	default:
		return nil
	}
	var n Network
	if _, err := getJSON(b, keyNetwork, &n); err != nil {
		return err
	}
	switch ev := rec.Event.(type) {
	case events.NetworkSet:
		n.CIDR, n.QuarantineSeconds = ev.CIDR, ev.QuarantineSeconds
	case events.AddressesAllotted:
		for _, a := range ev.Allotted {
			if err := releaseAddress(b, a.Node, at); err != nil {
				return err
			}
			if err := putJSON(b, addressKey(a.Address), AddressRow{Address: a.Address, Node: a.Node, Fixed: a.Fixed}); err != nil {
				return err
			}
			if err := b.Set(nodeAddressKey(a.Node), []byte(a.Address), nil); err != nil {
				return err
			}
		}
	case events.AddressesReleased:
		for _, a := range ev.Released {
			if err := releaseAddress(b, a.Node, at); err != nil {
				return err
			}
		}
	}
	n.Version = rec.Seq
	return putJSON(b, keyNetwork, n)
}

// releaseAddress gives node's address back, if it holds one.
func releaseAddress(b *pebble.Batch, node string, at time.Time) error {
	have, found, err := getRaw(b, nodeAddressKey(node))
	if err != nil || !found {
		return err
	}
	if err := b.Delete(nodeAddressKey(node), nil); err != nil {
		return err
	}
	return putJSON(b, addressKey(string(have)), AddressRow{Address: string(have), Released: at})
}

// Network reads the overlay's range, if one was set.
func (v *View) Network() (Network, bool, error) {
	var n Network
	found, err := getJSON(v.r, keyNetwork, &n)
	return n, found && n.CIDR != "", err
}

// Addresses lists every address not free, in numeric order.
func (v *View) Addresses() ([]AddressRow, error) {
	return decodeRows[AddressRow](v.r, prefixNetwork, 'a')
}

// AddressOf is node's overlay address ("" for none).
func (v *View) AddressOf(node string) (string, error) {
	raw, _, err := getRaw(v.r, nodeAddressKey(node))
	return string(raw), err
}

// NodeAddresses is every node's overlay address, by node.
func (v *View) NodeAddresses() (map[string]string, error) {
	// scanRows decodes on several goroutines: each row is returned, and
	// the map built here, on this one.
	rows, err := scanRows(v.r, []byte{prefixNodeAddress}, func(k, val []byte) ([2]string, error) {
		return [2]string{string(k[1:]), string(val)}, nil
	})
	out := make(map[string]string, len(rows))
	for _, r := range rows {
		out[r[0]] = r[1]
	}
	return out, err
}
