package provenance

import (
	"bytes"
	"errors"
	"testing"

	"github.com/meshctl/mesh/declaration"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/events/store"
	"github.com/meshctl/mesh/projections/foldtest"
	"github.com/nats-io/nats.go"
)

// Each writer's word is told from a stranger's by the message alone: the
// MAC of the key the writer holds, and the signer it names where that
// matters. Whatever fails is foreign, with why, never an error that
// would stop the fold.
func TestOfTellsTheRightfulWriter(t *testing.T) {
	keys := foldtest.Keys(t)
	stranger := []byte("not a key of this mesh")
	msg := func(subject string, data []byte, mac []byte, signer string) store.Msg {
		h := nats.Header{}
		h[events.MACHeader] = []string{declaration.MAC(mac, subject, data)}
		if signer != "" {
			h[events.SignerHeader] = []string{signer}
		}
		return store.Msg{Subject: subject, Data: data, Header: h}
	}
	enrol := events.NodeEnrolled{Name: "web-1"}
	applied := events.DeclarationApplied{Node: "web-1", Sequence: 1, Digest: "d"}
	failing := events.ProviderFailing{Provider: "db", Machine: "web-1", Consumer: "app"}
	const ctl, rep, std = "mesh.ev.node.web-1.NodeEnrolled", "mesh.rp.web-1.DeclarationApplied", "mesh.rp.web-1.ProviderFailing"
	for _, c := range []struct {
		name    string
		m       store.Msg
		ev      events.Event
		signer  string // "" when foreign
		foreign bool
	}{
		{"the controller's event with its MAC", msg(ctl, []byte("{}"), keys.LogMAC(), ""), enrol, keys.Controller(), false},
		{"a controller's event with another MAC", msg(ctl, []byte("{}"), stranger, ""), enrol, "", true},
		{"a node's report with its MAC", msg(rep, []byte("{}"), keys.NodeMAC("web-1"), "UREPORT"), applied, "UREPORT", false},
		{"a node's report with another node's MAC", msg(rep, []byte("{}"), keys.NodeMAC("web-2"), "UREPORT"), applied, "", true},
		{"a report with the controller's MAC, not a standing", msg(rep, []byte("{}"), keys.LogMAC(), keys.Controller()), applied, "", true},
		{"a report over the size a report may be", msg(rep, bytes.Repeat([]byte("x"), events.MaxReport+1), keys.NodeMAC("web-1"), "UREPORT"), applied, "", true},
		{"a standing on the operator's word", msg(std, []byte("{}"), keys.LogMAC(), keys.Controller()), failing, keys.Controller(), false},
		{"a standing with the controller's MAC signed by another", msg(std, []byte("{}"), keys.LogMAC(), "USOMEONE"), failing, "", true},
		// A message its store knows it appended (store.Known) is taken
		// at its MAC only under the key held here; under another its MAC
		// is checked, and fails.
		{"a known message whose MAC was made under this key", known(msg(ctl, []byte("{}"), keys.LogMAC(), ""), keys.LogMAC()), enrol, keys.Controller(), false},
		{"a known message under another key, with another MAC", known(msg(ctl, []byte("{}"), stranger, ""), stranger), enrol, "", true},
	} {
		var head declaration.Head
		signer, _, err := Of(keys, &declaration.MACChecker{}, c.m, c.ev, &head)
		switch {
		case c.foreign && !errors.Is(err, events.ErrForeign):
			t.Errorf("%s: err = %v, want a foreign message", c.name, err)
		case !c.foreign && err != nil:
			t.Errorf("%s: foreign (%v), want its writer's", c.name, err)
		case !c.foreign && signer != c.signer:
			t.Errorf("%s: signer %q, want %q", c.name, signer, c.signer)
		}
	}
}

// known marks m as a message its store appended itself with its MAC made
// under key.
func known(m store.Msg, key []byte) store.Msg {
	m.Known = &store.Known{MACKey: key}
	return m
}
