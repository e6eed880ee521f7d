package events

// The mesh's own network (issue 18): one range of overlay addresses, and
// each active node's address from it. The range and every address given
// or taken back are events of one aggregate, the address pool
// (mesh.ev.network.overlay.>): every change to it is an append expecting
// its version, so two controllers never give one address twice.

// KindNetwork is the aggregate kind of the address pool.
const KindNetwork = "network"

// PoolAggregate is the address pool: there is one.
func PoolAggregate() AggregateID { return AggregateID{Kind: KindNetwork, ID: "overlay"} }

// NetworkSet: the overlay's range is CIDR from now on; an address taken
// back is not given again for QuarantineSeconds.
type NetworkSet struct {
	CIDR              string `json:"cidr"`
	QuarantineSeconds int    `json:"quarantine_seconds"`
}

// Allotment is one node's overlay address. Fixed: the operator asked for
// this address, rather than the pool choosing the next free one.
type Allotment struct {
	Node    string `json:"node"`
	Address string `json:"address"`
	Fixed   bool   `json:"fixed,omitempty"`
}

// AddressesAllotted: these nodes have these addresses. A node that had
// another gives it up (it is quarantined like a released one).
type AddressesAllotted struct {
	Allotted []Allotment `json:"allotted"`
}

// AddressesReleased: these nodes (retired) gave their addresses back; each
// is quarantined before it is given again.
type AddressesReleased struct {
	Released []Allotment `json:"released"`
}

func (NetworkSet) EventType() string        { return "NetworkSet" }
func (AddressesAllotted) EventType() string { return "AddressesAllotted" }
func (AddressesReleased) EventType() string { return "AddressesReleased" }
