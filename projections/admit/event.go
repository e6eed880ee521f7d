package admit

import (
	"time"

	"github.com/meshctl/mesh/declaration"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/projections/provenance"
	"github.com/meshctl/mesh/projections/rows"
)

// Models is what admission reads of the read models, as they stand at the
// event's place in the log: the fold's batch, which holds every event
// before it.
type Models interface {
	// Node reads a node's row.
	Node(name string) (rows.Node, bool, error)
	// ReportKey is the key node's reports are signed with now ("" for none).
	ReportKey(node string) (string, error)
	// OwnKeys are the keys node made itself (found false: it did not).
	OwnKeys(node string) (OwnKeys, bool, error)
	// Token says whether the token was ever created.
	Token(id string) (bool, error)
	// Placements are what the standing rule reads, at the same place.
	Placements() Placements
}

// OwnKeys are what admission reads of the keys a node made itself
// (projections' NodeKeys row).
type OwnKeys struct {
	Node, Bus, Report string
	Seq               uint64 // the event that recorded them
}

// admission reads what it needs through m.
type admission struct {
	m      Models
	keys   *declaration.Keyring
	shapes Shapes
}

// Event holds an event to what the read models know, before any of them
// changes: m as they stand at its place in the log, keys the controller's,
// shapes the builds' shapes remembered (see Shapes). It answers why the
// event is foreign, or nil. An error reading the read models is the second
// result: that stops the fold, since it is no fault of the event.
func Event(m Models, keys *declaration.Keyring, shapes Shapes, rec events.Recorded) (foreign, err error) {
	f := admission{m: m, keys: keys, shapes: shapes}
	node := m.Node
	if events.AgentReport(rec.Event.EventType()) {
		return f.agentReport(rec)
	}
	switch ev := rec.Event.(type) {
	case events.NodeEnrolled:
		n, found, err := node(ev.Name)
		if err != nil || !found {
			return nil, err
		}
		return events.Foreignf("it enrols %s, enrolled already at event %d", ev.Name, n.EnrolledSeq), nil
	case events.NodeRetired:
		return f.needNode(ev.Name, false)
	case events.NodeChanged:
		return f.needNode(ev.Name, true)
	case events.SecretForgotten:
		// A retired node's secret may be forgotten too: it leaked all the same.
		return f.needNode(ev.Node, false)
	case events.ModuleAssigned, events.ModuleUnassigned:
		// Not checked against the catalogue: an assignment and the
		// registration of its build are events of two aggregates, and
		// composition must not depend on the order they were folded in
		// (TestCompositionDoesNotDependOnEventOrder).
		return f.needNode(events.Rights[ev.EventType()].Name(ev), true)
	case events.DeclarationSent:
		n, found, err := node(ev.Node)
		switch {
		case err != nil:
			return nil, err
		case !found:
			return events.Foreignf("it names node %s, which was never enrolled", ev.Node), nil
		case n.Retired:
			return events.Foreignf("it sends to %s, retired at %s", ev.Node, n.RetiredAt.UTC().Format(time.RFC3339)), nil
		case n.LastSent != nil && ev.Sequence <= n.LastSent.Sequence:
			return events.Foreignf("its sequence %d does not rise above %d, the last sent to %s", ev.Sequence, n.LastSent.Sequence, ev.Node), nil
		}
	case events.ProviderFailing, events.ProviderRecovered:
		name := events.Rights[ev.EventType()].Name(ev)
		if foreign, err := f.needNode(name, false); foreign != nil || err != nil {
			return foreign, err
		}
		if foreign, owned, err := f.owned(rec, name); owned || err != nil {
			return foreign, err
		}
		key, err := f.m.ReportKey(name)
		if err != nil {
			return nil, err
		}
		// A standing is the word of a provider on the machine (its agent's
		// key or the machine's join string) or the operator's, through the
		// controller.
		// Or, since issue 15, the provider itself running there, by its
		// own identity (provenance held the MAC and signature to it).
		module, _ := f.keys.Module(name, provenance.StandingProvider(ev))
		if rec.Signer == "" || rec.Signer != key && rec.Signer != f.keys.NodeBus(name) && rec.Signer != f.keys.Controller() && rec.Signer != module {
			return events.Foreignf("a standing for %s signed by %q, which is neither %s's nor the controller's", name, rec.Signer, name), nil
		}
		_, recovery := ev.(events.ProviderRecovered)
		provider, consumer := provenance.StandingNames(ev)
		return Standing(f.m.Placements(), f.shapes, provider, name, consumer, recovery)
	case events.ReportKeyRecorded:
		if foreign, err := f.needNode(ev.Node, false); foreign != nil || err != nil {
			return foreign, err
		}
		if k, owned, err := f.m.OwnKeys(ev.Node); owned || err != nil {
			return events.Foreignf("%s made its own keys (event %d); its report key changes only by mesh node rekey", ev.Node, k.Seq), err
		}
	case events.NodeKeysRecorded:
		if foreign, err := f.needNode(ev.Node, true); foreign != nil || err != nil {
			return foreign, err
		}
		if k, owned, err := f.m.OwnKeys(ev.Node); !ev.Rekey && owned || err != nil {
			return events.Foreignf("it records keys for %s, which has its own since event %d; only a re-key replaces them", ev.Node, k.Seq), err
		}
	case events.TokenUsed, events.TokenRevoked:
		id := events.Rights[ev.EventType()].Name(ev)
		found, err := f.m.Token(id)
		if err != nil || !found {
			return events.Foreignf("it names token %s, which was never created", id), err
		}
	case events.NodeFlooded:
		return f.needNode(ev.Node, false)
	case events.NodeUnreachable, events.NodeReachable:
		// Not only active nodes: a node may be retired between the
		// controller's reading of its silence and this append.
		return f.needNode(events.Rights[ev.EventType()].Name(ev), false)
	}
	return nil, nil
}

// needNode: the event names a node that was enrolled (and, for active,
// is not retired).
func (f admission) needNode(name string, active bool) (foreign, err error) {
	n, found, err := f.m.Node(name)
	switch {
	case err != nil:
		return nil, err
	case !found:
		return events.Foreignf("it names node %s, which was never enrolled", name), nil
	case active && n.Retired:
		return events.Foreignf("it changes %s, retired at %s", name, n.RetiredAt.UTC().Format(time.RFC3339)), nil
	}
	return nil, nil
}

// agentReport admits a report that is the node's agent's word alone
// (events.AgentReport): of a node the log knows, signed by the report key
// it recorded.
func (f admission) agentReport(rec events.Recorded) (foreign, err error) {
	name := events.Rights[rec.Event.EventType()].Name(rec.Event)
	if foreign, err := f.needNode(name, false); foreign != nil || err != nil {
		return foreign, err
	}
	if foreign, owned, err := f.owned(rec, name); owned || err != nil {
		return foreign, err
	}
	key, err := f.m.ReportKey(name)
	switch {
	case err != nil:
		return nil, err
	case key == "":
		return events.Foreignf("%s has recorded no report key, so no report of its can be its agent's", name), nil
	case rec.Signer != key:
		return events.Foreignf("it is signed by %q, not by %s's report key %s", rec.Signer, name, key), nil
	}
	return nil, nil
}

// owned holds a report of a node that made its own keys to them: its
// signature, checked on a worker, by the key it recorded. A MAC proves
// nothing here, since the controller key makes any derived one. found
// false: the node did not make its own keys, and the MAC checks stand.
func (f admission) owned(rec events.Recorded, node string) (foreign error, found bool, err error) {
	k, found, err := f.m.OwnKeys(node)
	if err != nil || !found {
		return nil, found, err
	}
	switch {
	case rec.Signer == f.keys.Controller() && provenance.IsStanding(rec.Event) && !rec.Verified:
		// The operator's word, through the controller (its MAC, checked).
		return nil, true, nil
	case !rec.Verified:
		return events.Foreignf("it carries a MAC the controller key can make, not a signature by a key %s made; %s's keys are its own since event %d", node, node, k.Seq), true, nil
	case rec.Signer == k.Report:
		return nil, true, nil
	case provenance.IsStanding(rec.Event) && vouched(k, rec):
		return nil, true, nil
	}
	return events.Foreignf("it is signed by %q, which is not a key %s recorded (its report key is %s)", rec.Signer, node, k.Report), true, nil
}

// vouched: the message's signer is a module's identity on the node, which
// the node's own bus key vouched for (declaration.Voucher), and the
// standing names that module as its provider.
func vouched(k OwnKeys, rec events.Recorded) bool {
	return declaration.CheckVoucher(k.Bus, k.Node, provenance.StandingProvider(rec.Event), rec.Signer, rec.Voucher)
}
