package provenance

import (
	"bytes"

	"github.com/meshctl/mesh/compose"
	"github.com/meshctl/mesh/declaration"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/events/store"
)

// Of answers the signer m names and nil, or why m is foreign; verified
// says the signer's signature was checked here (a report with no MAC the
// controller can make: the fold's admit holds it to the node's own keys).
// head, for a declaration sent, is filled with the head of the signed
// bytes it carries, read here once so that the fold need not read it again.
func Of(keys *declaration.Keyring, macs *declaration.MACChecker, m store.Msg, ev events.Event, head *declaration.Head) (signer string, verified bool, err error) {
	signer, err = provenanceMAC(keys, macs, m, ev, head)
	if err == nil || events.Rights[ev.EventType()].Writer == events.ByController || len(m.Data) > events.MaxReport {
		return signer, false, err
	}
	// No MAC this controller can check. A node that made its own keys
	// (issue 29) has none the controller could make: its report stands on
	// its signature alone, which admit holds to the node's recorded keys.
	// Checked here, on the decoding workers, because it costs about 50 µs.
	if declaration.Verify(signer, m.Data, Header(m, events.SignatureHeader)) {
		return signer, true, nil
	}
	return signer, false, err
}

// provenanceMAC is Of by MAC: the controller's, or one derived from
// the controller key for a node enrolled before keys were born on nodes.
func provenanceMAC(keys *declaration.Keyring, macs *declaration.MACChecker, m store.Msg, ev events.Event, head *declaration.Head) (string, error) {
	mac, signer := Header(m, events.MACHeader), Header(m, events.SignerHeader)
	switch events.Rights[ev.EventType()].Writer {
	case events.ByController:
		// A message this controller's store appended and read back byte
		// for byte carries the MAC it made under the key it names: the
		// check's answer is known when that key is the one held here.
		known := m.Known != nil && bytes.Equal(m.Known.MACKey, keys.LogMAC())
		if !known && !macs.Check(keys.LogMAC(), m.Subject, m.Data, mac) {
			return signer, events.Foreignf("it does not carry the MAC of this mesh's controller, so the controller did not write it")
		}
		if sent, ok := ev.(events.DeclarationSent); ok {
			return sent.Key, checkSent(keys, sent, head)
		}
		return keys.Controller(), nil
	default:
		// The reporting node, which Check held to the subject's.
		node := events.Rights[ev.EventType()].Name(ev)
		if len(m.Data) > events.MaxReport {
			return signer, events.Foreignf("a report of %d bytes, over the %d bytes a report may be", len(m.Data), events.MaxReport)
		}
		switch {
		case macs.Check(keys.NodeMAC(node), m.Subject, m.Data, mac):
		case IsStanding(ev) && macs.Check(moduleMAC(keys, node, ev), m.Subject, m.Data, mac):
			// A running module's own standing: the MAC and the signature
			// of that module's identity on that node, and no other's.
			if pub, _ := keys.Module(node, StandingProvider(ev)); signer != pub {
				return signer, events.Foreignf("a standing of %s carrying its MAC, signed by %s, not by its identity %s", StandingProvider(ev), signer, pub)
			}
			return signer, nil
		case IsStanding(ev) && macs.Check(keys.LogMAC(), m.Subject, m.Data, mac):
			if signer != keys.Controller() {
				return signer, events.Foreignf("a standing with the controller's MAC, signed by %s, not by the controller", signer)
			}
			return signer, nil
		default:
			return signer, events.Foreignf("it does not carry %s's MAC, so neither its agent nor the controller wrote it", node)
		}
		// A key record names its key as its signer; that the key signed it
		// (possession) audit checks, with every other signature.
		if rk, ok := ev.(events.ReportKeyRecorded); ok && signer != rk.Key {
			return signer, events.Foreignf("it records report key %s but names %q as its signer", rk.Key, signer)
		}
		return signer, nil
	}
}

// checkSent holds a send's event to the signed bytes it carries: they are
// the digest it names, and for the node and sequence it names, signed by
// this controller's key. (The MAC already proves the controller wrote the
// event; this is what keeps a row from disagreeing with the bytes.)
func checkSent(keys *declaration.Keyring, sent events.DeclarationSent, head *declaration.Head) error {
	if sent.Key != keys.Controller() {
		return events.Foreignf("a declaration signed by %s, not by this mesh's controller %s", sent.Key, keys.Controller())
	}
	if !compose.DigestIs(sent.Declaration, sent.Digest) {
		return events.Foreignf("its recorded digest %s is not the digest of the declaration it carries", sent.Digest)
	}
	h, err := declaration.ReadHead(sent.Declaration)
	switch {
	case err != nil:
		return events.Foreignf("the declaration it carries cannot be read: %v", err)
	case h.Node != sent.Node || h.Sequence != sent.Sequence:
		return events.Foreignf("it says %s sequence %d, the signed bytes %s sequence %d", sent.Node, sent.Sequence, h.Node, h.Sequence)
	}
	*head = h
	return nil
}

// moduleMAC is the MAC key of the identity of the provider a standing
// names, running on node.
func moduleMAC(keys *declaration.Keyring, node string, ev events.Event) []byte {
	_, mac := keys.Module(node, StandingProvider(ev))
	return mac
}

// StandingProvider is the provider a standing names ("" for another event).
func StandingProvider(ev events.Event) string {
	provider, _ := StandingNames(ev)
	return provider
}

// StandingNames are the provider and the consumer a standing names.
func StandingNames(ev events.Event) (provider, consumer string) {
	switch s := ev.(type) {
	case events.ProviderFailing:
		return s.Provider, s.Consumer
	case events.ProviderRecovered:
		return s.Provider, s.Consumer
	}
	return "", ""
}

// IsStanding: a standing (ProviderFailing, ProviderRecovered), which a
// provider's own identity may sign as well as its node's agent.
func IsStanding(ev events.Event) bool {
	switch ev.(type) {
	case events.ProviderFailing, events.ProviderRecovered:
		return true
	}
	return false
}

// Header reads one of the mesh's headers. Their names are in canonical
// form, so the map is read directly: Get canonicalises the name at every
// call, a tenth of checking a message.
func Header(m store.Msg, name string) string {
	if v := m.Header[name]; len(v) > 0 {
		return v[0]
	}
	return ""
}
