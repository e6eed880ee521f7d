package wire

import (
	"time"
)

// NetworkRequest sets the overlay's range.
type NetworkRequest struct {
	CommandID  string        `json:"command_id"`
	CIDR       string        `json:"cidr"`
	Quarantine time.Duration `json:"quarantine,omitempty"` // 0: aggregates.DefaultQuarantine
}

// AddressRequest gives a node the address it asks for.
type AddressRequest struct {
	CommandID string `json:"command_id"`
	Node      string `json:"node"`
	Address   string `json:"address"`
}

// NetworkView is the overlay: its range, and every address not free.
type NetworkView struct {
	CIDR              string       `json:"cidr,omitempty"`
	QuarantineSeconds int          `json:"quarantine_seconds,omitempty"`
	Addresses         []AddressRow `json:"addresses"`
	// Changed and Allotted answer network set: whether the range changed,
	// and how many nodes were given an address by it.
	Changed  bool   `json:"changed"`
	Allotted int    `json:"allotted"`
	Seq      uint64 `json:"seq,omitempty"`
}
