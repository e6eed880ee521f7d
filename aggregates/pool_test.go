package aggregates

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/meshctl/mesh/events"
)

// applied folds evs into p as if appended at at.
func applied(p *Pool, at time.Time, evs ...events.Event) {
	for _, ev := range evs {
		p.Apply(events.Recorded{Seq: p.Version + 1, Envelope: events.Envelope{Meta: events.Meta{OccurredAt: at}}, Event: ev})
	}
}

// The pool gives the lowest free address of the range (never the range's
// own address nor its broadcast), says an exhausted range, quarantines an
// address given back, honours a fixed address, and refuses a range that
// leaves out an address in use. Each check fails when its rule is broken.
func TestThePoolGivesAddresses(t *testing.T) {
	at := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	p := NewPool()
	if evs, err := p.Allot([]string{"a"}, nil, at); err != nil || evs != nil {
		t.Fatalf("no network: %v %v", evs, err)
	}
	evs, err := p.Set("10.9.0.0/29", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	applied(p, at, evs...)
	allot := func(nodes ...string) (events.AddressesAllotted, error) {
		evs, err := p.Allot(nodes, nil, at)
		if err != nil || len(evs) == 0 {
			return events.AddressesAllotted{}, err
		}
		applied(p, at, evs...)
		return evs[0].(events.AddressesAllotted), nil
	}
	got, err := allot("a", "b", "c", "d", "e", "f")
	if err != nil || got.Allotted[0].Address != "10.9.0.1" || got.Allotted[5].Address != "10.9.0.6" {
		t.Fatalf("six nodes in a /29: %+v %v", got, err)
	}
	if _, err := allot("g"); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "no free address left") {
		t.Fatalf("an exhausted range: %v", err)
	}
	applied(p, at, p.Releases("b")...)
	if _, err := allot("g"); err == nil {
		t.Fatal("b's address was given again within the quarantine")
	}
	at = at.Add(2 * time.Hour)
	if got, err := allot("g"); err != nil || got.Allotted[0].Address != "10.9.0.2" {
		t.Fatalf("after the quarantine: %+v %v", got, err)
	}
	if _, err := p.Allot([]string{"h"}, map[string]netip.Addr{"h": netip.MustParseAddr("10.9.0.3")}, at); err == nil || !strings.Contains(err.Error(), "held by c") {
		t.Fatalf("a fixed address held by another: %v", err)
	}
	if _, err := p.Set("10.9.0.0/30", time.Hour); err == nil || !strings.Contains(err.Error(), "lies outside it") {
		t.Fatalf("a range that leaves out addresses in use: %v", err)
	}
	if evs, err := p.Set("10.9.0.0/24", time.Hour); err != nil || len(evs) != 1 {
		t.Fatalf("a wider range: %v %v", evs, err)
	}
	if _, err := p.Set("10.9.0.1/24", time.Hour); err == nil {
		t.Fatal("a range given by an address inside it was taken")
	}
}
