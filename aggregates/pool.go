package aggregates

import (
	"cmp"
	"fmt"
	"net/netip"
	"time"

	"github.com/meshctl/mesh/events"
)

// Pool is the overlay's address pool (issue 18): the range, and which
// address each active node has. One aggregate for the whole mesh, so that
// every address given is an append expecting its version: two controllers
// enrolling at once never give one address twice (the second's append
// conflicts, and it decides again on what the first gave).
type Pool struct {
	Range      netip.Prefix // invalid until the network is set
	Quarantine time.Duration
	// Used is every address not free: held by a node, or given back less
	// than Quarantine ago.
	Used map[netip.Addr]AddressUse
	// Of is each node's address.
	Of      map[string]netip.Addr
	Version uint64
}

// AddressUse is who holds an address, or since when it is free again.
type AddressUse struct {
	Node     string // "" once released
	Fixed    bool
	Released time.Time
}

// DefaultQuarantine is how long an address given back waits before it is
// given again: long enough that a peer still holding the retired node's
// address in its configuration is not mistaken for a new node.
const DefaultQuarantine = 24 * time.Hour

// NewPool is the pool before any of its events.
func NewPool() *Pool {
	return &Pool{Used: map[netip.Addr]AddressUse{}, Of: map[string]netip.Addr{}}
}

// Apply folds one of the pool's events.
func (p *Pool) Apply(rec events.Recorded) {
	switch ev := rec.Event.(type) {
	case events.NetworkSet:
		p.Range, _ = netip.ParsePrefix(ev.CIDR)
		p.Quarantine = time.Duration(ev.QuarantineSeconds) * time.Second
	case events.AddressesAllotted:
		for _, a := range ev.Allotted {
			p.Hold(a, rec.Envelope.OccurredAt)
		}
	case events.AddressesReleased:
		for _, a := range ev.Released {
			p.Release(a.Node, rec.Envelope.OccurredAt)
		}
	}
	p.Version = rec.Seq
}

// Hold records that a.Node holds a.Address, giving back what it held.
func (p *Pool) Hold(a events.Allotment, at time.Time) {
	p.Release(a.Node, at)
	addr, err := netip.ParseAddr(a.Address)
	if err != nil {
		return
	}
	p.Used[addr] = AddressUse{Node: a.Node, Fixed: a.Fixed}
	p.Of[a.Node] = addr
}

// Release records that node gave its address back at at.
func (p *Pool) Release(node string, at time.Time) {
	if addr, ok := p.Of[node]; ok {
		p.Used[addr] = AddressUse{Released: at}
		delete(p.Of, node)
	}
}

// Set decides a new range: refused while an address held lies outside it.
// It keeps every address held inside it.
func (p *Pool) Set(cidr string, quarantine time.Duration) ([]events.Event, error) {
	prefix, err := netip.ParsePrefix(cidr)
	if err != nil || prefix != prefix.Masked() {
		return nil, refuse("set the network to", cidr, ErrInvalid, "it is not a range such as 10.42.0.0/16 or fd00:42::/64 (its address the first of the range)")
	}
	if usable(prefix) < 1 {
		return nil, refuse("set the network to", cidr, ErrInvalid, "it holds no address a node can have; give a wider range")
	}
	for addr, use := range p.Used {
		if use.Node != "" && !prefix.Contains(addr) {
			return nil, refuse("set the network to", cidr, ErrInvalid,
				"%s holds %s, which lies outside it; choose a range that holds every address in use (mesh network show lists them), or retire those nodes first", use.Node, addr)
		}
	}
	if prefix == p.Range && quarantine == p.Quarantine {
		return nil, nil
	}
	return []events.Event{events.NetworkSet{CIDR: prefix.String(), QuarantineSeconds: int(quarantine.Seconds())}}, nil
}

// Allot gives each of nodes that has no address the lowest free one, or
// the one fixed asks for it: one event, or none when the network is not
// set or every node has one. An exhausted range, or a fixed address taken
// or outside the range, is refused and says which.
func (p *Pool) Allot(nodes []string, fixed map[string]netip.Addr, now time.Time) ([]events.Event, error) {
	if !p.Range.IsValid() {
		if len(fixed) > 0 {
			return nil, refuse("give an address to", "a node", ErrInvalid, "the mesh has no network yet; set one first (mesh network set CIDR)")
		}
		return nil, nil
	}
	ev := events.AddressesAllotted{}
	taken := map[netip.Addr]bool{}
	next := p.Range.Addr()
	for _, n := range nodes {
		if want, ok := fixed[n]; ok {
			if err := p.free(want, now, taken); err != nil {
				return nil, refuse("give an address to", n, ErrInvalid, "%v", err)
			}
			taken[want] = true
			ev.Allotted = append(ev.Allotted, events.Allotment{Node: n, Address: want.String(), Fixed: true})
			continue
		}
		if _, has := p.Of[n]; has {
			continue
		}
		for {
			next = next.Next()
			if !next.IsValid() || !p.Range.Contains(next) || isBroadcast(p.Range, next) {
				return nil, refuse("give an address to", n, ErrInvalid, "the overlay range %s has no free address left (%d in use, %d given back less than %s ago); widen it with mesh network set",
					p.Range, len(p.Of)+len(taken), len(p.Used)-len(p.Of), p.Quarantine)
			}
			if p.free(next, now, taken) == nil {
				break
			}
		}
		taken[next] = true
		ev.Allotted = append(ev.Allotted, events.Allotment{Node: n, Address: next.String()})
	}
	if len(ev.Allotted) == 0 {
		return nil, nil
	}
	return []events.Event{ev}, nil
}

// free says why addr cannot be given now, or nil.
func (p *Pool) free(addr netip.Addr, now time.Time, taken map[netip.Addr]bool) error {
	use, used := p.Used[addr]
	switch {
	case !p.Range.Contains(addr) || addr == p.Range.Addr() || isBroadcast(p.Range, addr):
		return fmt.Errorf("%s is not an address of the overlay range %s a node can have", addr, p.Range)
	case taken[addr] || used && use.Node != "":
		return fmt.Errorf("%s is held by %s", addr, cmp.Or(use.Node, "another node of this request"))
	case used && now.Sub(use.Released) < p.Quarantine:
		return fmt.Errorf("%s was given back at %s and is quarantined until %s", addr, use.Released.UTC().Format(time.RFC3339),
			use.Released.Add(p.Quarantine).UTC().Format(time.RFC3339))
	}
	return nil
}

// Releases is the event giving back the addresses of nodes that have one.
func (p *Pool) Releases(nodes ...string) []events.Event {
	ev := events.AddressesReleased{}
	for _, n := range nodes {
		if addr, ok := p.Of[n]; ok {
			ev.Released = append(ev.Released, events.Allotment{Node: n, Address: addr.String()})
		}
	}
	if len(ev.Released) == 0 {
		return nil
	}
	return []events.Event{ev}
}

// isBroadcast is the last address of an IPv4 range wider than /31, which
// no node can have.
func isBroadcast(prefix netip.Prefix, addr netip.Addr) bool {
	if !addr.Is4() || prefix.Bits() >= 31 {
		return false
	}
	last := prefix.Addr().As4()
	host := 32 - prefix.Bits()
	for i := range 4 {
		bits := min(max(host-8*(3-i), 0), 8)
		last[i] |= byte(1<<bits - 1)
	}
	return addr == netip.AddrFrom4(last)
}

// usable is how many addresses of prefix a node can have, capped.
func usable(prefix netip.Prefix) int {
	host := prefix.Addr().BitLen() - prefix.Bits()
	if host > 20 {
		return 1 << 20
	}
	n := 1<<host - 1 // not the range's own address
	if prefix.Addr().Is4() && prefix.Bits() < 31 {
		n-- // nor its broadcast
	}
	return n
}
