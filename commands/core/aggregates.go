package core

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/meshctl/mesh/aggregates"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/events/store"
	"github.com/meshctl/mesh/manifest"
	"github.com/meshctl/mesh/projections"
)

// How a decision reads the aggregates it changes from the read models
// (DecideAtomic): each as its row holds it, with the version its append
// expects.

// NodeOf is a node's aggregate as far as assigning needs it, from
// its read model row: enrolled, retired, its assignments and its version.
// The version is the append's expectation, so a row behind the stream
// fails the append rather than deciding on stale state.
func NodeOf(v *projections.View, name string) (*aggregates.Node, error) {
	n := aggregates.NewNode(name)
	row, found, err := v.Node(name)
	if err != nil || !found {
		return n, err
	}
	n.Enrolled, n.Retired, n.Version = true, row.Retired, row.Version
	n.Capabilities, n.Labels = row.Capabilities, row.Labels
	as, err := v.AssignmentsOf(name)
	for _, a := range as {
		n.Assignments[a.Module] = aggregates.Assignment{Build: a.Build, Settings: OrEmpty(a.Settings), Policy: a.Policy}
	}
	return n, err
}

// PoolOf is the address pool as the read models hold it.
func PoolOf(v *projections.View) (*aggregates.Pool, error) {
	p := aggregates.NewPool()
	n, found, err := v.Network()
	if err != nil || !found {
		if err == nil {
			p.Version = n.Version
		}
		return p, err
	}
	p.Range, _ = netip.ParsePrefix(n.CIDR)
	p.Quarantine, p.Version = time.Duration(n.QuarantineSeconds)*time.Second, n.Version
	rows, err := v.Addresses()
	for _, r := range rows {
		addr, perr := netip.ParseAddr(r.Address)
		if perr != nil {
			continue
		}
		p.Used[addr] = aggregates.AddressUse{Node: r.Node, Fixed: r.Fixed, Released: r.Released}
		if r.Node != "" {
			p.Of[r.Node] = addr
		}
	}
	return p, err
}

// SeatOf is a seat's aggregate as the read models hold it.
func SeatOf(v *projections.View, name string) (*aggregates.Seat, error) {
	s := aggregates.NewSeat(name)
	row, found, err := v.Seat(name)
	if err != nil || !found {
		return s, err
	}
	s.Node, s.Module, s.HandoverTo, s.HandoverForced, s.Version = row.Node, row.Module, row.HandoverTo, row.Force, row.Version
	return s, nil
}

// ClaimItems are the seat events of module on node taking the seats m
// claims, each expecting its seat's version; taken names the seats this
// batch already gives, so a batch never gives one seat twice. A seat held
// by another is refused, naming the holder.
func ClaimItems(v *projections.View, node, module string, m manifest.Manifest, taken map[string]string) ([]store.One, error) {
	var items []store.One
	for _, name := range m.Claims {
		if other, dup := taken[name]; dup && other != node {
			return nil, aggregates.Refuse("claim seat", name, aggregates.ErrNameTaken, fmt.Sprintf("this request gives %s to both %s and %s, and a seat has one holder; assign it to one node", module, other, node))
		}
		s, err := SeatOf(v, name)
		if err != nil {
			return nil, err
		}
		evs, err := s.Claim(node, module)
		if err != nil {
			return nil, err
		}
		for _, ev := range evs {
			items = append(items, store.One{Aggregate: events.SeatAggregate(name), Expected: s.Version, Event: ev})
		}
		if taken != nil {
			taken[name] = node
		}
	}
	return items, nil
}

// ReleaseItems are the seat events of node letting go every seat module
// (every module, when module is "") holds there.
func ReleaseItems(v *projections.View, node, module, why string) ([]store.One, error) {
	seats, err := v.Seats()
	var items []store.One
	for _, row := range seats {
		if row.Node != node || module != "" && row.Module != module {
			continue
		}
		s, err := SeatOf(v, row.Seat)
		if err != nil {
			return nil, err
		}
		for _, ev := range s.Release(node, why) {
			items = append(items, store.One{Aggregate: events.SeatAggregate(row.Seat), Expected: s.Version, Event: ev})
		}
	}
	return items, err
}

// OrEmpty is m, or an empty map for nil: a row decoded without labels or
// settings compares equal to one written with none.
func OrEmpty(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}
