package projections

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/projections/provenance"
)

// Foreign messages (rule 19): what arrived on the stream and is not its
// rightful writer's event. Each is kept here, by stream sequence, with why,
// and never folded into any other read model: one message from a stray
// writer can neither change what the mesh believes nor stop the fold.
// Until the operator acknowledges it (ForeignAcknowledged), status is not
// well; after, it stays listed, and audit names it for ever.

func foreignKey(seq uint64) []byte { return binary.BigEndian.AppendUint64([]byte{prefixForeign}, seq) }
func openForeignKey(seq uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{prefixForeignOpen}, seq)
}
func reportKeyKey(node string) []byte { return append([]byte{prefixReportKey}, node...) }

// putForeign records rec as foreign, open.
func putForeign(b *pebble.Batch, rec events.Recorded) error {
	row := ForeignMessage{Seq: rec.Seq, Subject: rec.Subject, Writer: rec.Signer, Reason: reasonOf(rec.Foreign), Stored: rec.Stored}
	s, _ := events.ParseSubject(rec.Subject)
	if n := s.Touches(); n != "" && events.ValidateName("node", n) == nil {
		row.Nodes = append(row.Nodes, n)
	}
	if rec.Event != nil {
		row.Type = rec.Event.EventType()
		if r, ok := events.Rights[row.Type]; ok {
			if n := r.Name(rec.Event); n != "" && n != s.Touches() && events.ValidateName("node", n) == nil && r.Kind != events.KindModule {
				row.Nodes = append(row.Nodes, n)
			}
		}
	}
	slices.Sort(row.Nodes)
	row.Nodes = slices.Compact(row.Nodes)
	if err := putJSON(b, foreignKey(rec.Seq), row); err != nil {
		return err
	}
	return b.Set(openForeignKey(rec.Seq), nil, nil)
}

func reasonOf(err error) string {
	var fe *events.ForeignError
	if errors.As(err, &fe) {
		return fe.Reason
	}
	return err.Error()
}

// foldForeign marks acknowledged foreign messages and floods. Acknowledging
// one that is neither, or is already acknowledged, changes nothing: the
// controller refuses such a command, and a replay must fold the same.
func foldForeign(b *pebble.Batch, rec events.Recorded) error {
	ack, ok := rec.Event.(events.ForeignAcknowledged)
	if !ok {
		return nil
	}
	seqs := ack.Seqs
	if ack.To > 0 {
		// A range marks what is open in it now: every message it covers
		// was folded before it, so a replay finds the same ones.
		open, err := openForeignIn(b, ack.From, ack.To)
		if err != nil {
			return err
		}
		seqs = append(slices.Clone(seqs), open...)
	}
	for _, seq := range seqs {
		var row ForeignMessage
		found, err := getJSON(b, foreignKey(seq), &row)
		if err != nil {
			return err
		}
		if !found || row.Acked != 0 {
			continue
		}
		row.Acked = rec.Seq
		if err := putJSON(b, foreignKey(seq), row); err != nil {
			return err
		}
		if err := b.Delete(openForeignKey(seq), nil); err != nil {
			return err
		}
	}
	return ackFloods(b, ack, rec.Seq)
}

// openForeignIn answers the foreign messages from..to (both included) not
// acknowledged.
func openForeignIn(r pebble.Reader, from, to uint64) ([]uint64, error) {
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: openForeignKey(from), UpperBound: openForeignKey(to + 1)})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var out []uint64
	for it.First(); it.Valid(); it.Next() {
		out = append(out, binary.BigEndian.Uint64(it.Key()[1:]))
	}
	return out, it.Error()
}

// admit holds an event to what the read models know, before any of them
// changes (rule 19's second half; provenance did the first on a worker).
// It answers why the event is foreign, or nil. An error reading Pebble is
// the second result: that stops the fold, since it is no fault of the event.
func (f *folder) admit(rec events.Recorded) (foreign, err error) {
	node := f.node
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
		if foreign, owned, err := f.admitOwned(rec, name); owned || err != nil {
			return foreign, err
		}
		key, err := f.reportKey(name)
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
		return f.admitStanding(provider, name, consumer, recovery)
	case events.ReportKeyRecorded:
		if foreign, err := f.needNode(ev.Node, false); foreign != nil || err != nil {
			return foreign, err
		}
		if k, owned, err := f.ownKeys(ev.Node); owned || err != nil {
			return events.Foreignf("%s made its own keys (event %d); its report key changes only by mesh node rekey", ev.Node, k.Seq), err
		}
	case events.NodeKeysRecorded:
		if foreign, err := f.needNode(ev.Node, true); foreign != nil || err != nil {
			return foreign, err
		}
		if k, owned, err := f.ownKeys(ev.Node); !ev.Rekey && owned || err != nil {
			return events.Foreignf("it records keys for %s, which has its own since event %d; only a re-key replaces them", ev.Node, k.Seq), err
		}
	case events.TokenUsed, events.TokenRevoked:
		id := events.Rights[ev.EventType()].Name(ev)
		found, err := getJSON(f.b, tokenKey(id), &Token{})
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
func (f *folder) needNode(name string, active bool) (foreign, err error) {
	n, found, err := f.node(name)
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

// reportKey is the key node's reports are signed with now ("" for none).
func (f *folder) reportKey(node string) (string, error) {
	if k, ok := f.reportKeys[node]; ok {
		return k, nil
	}
	v, closer, err := f.b.Get(reportKeyKey(node))
	if errors.Is(err, pebble.ErrNotFound) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	defer closer.Close()
	f.reportKeys[node] = string(v)
	return string(v), nil
}

// foldReportKeys keeps each node's report key in force.
func (f *folder) foldReportKeys(rec events.Recorded) error {
	if rk, ok := rec.Event.(events.ReportKeyRecorded); ok {
		f.reportKeys[rk.Node] = rk.Key
		return f.b.Set(reportKeyKey(rk.Node), []byte(rk.Key), nil)
	}
	return nil
}

// Foreign lists every foreign message, by stream sequence.
func (v *View) Foreign() ([]ForeignMessage, error) {
	return decodeRows[ForeignMessage](v.r, prefixForeign)
}

// ForeignAt reads the foreign message at stream sequence seq, if the
// message there was set aside.
func (v *View) ForeignAt(seq uint64) (ForeignMessage, bool, error) {
	var row ForeignMessage
	found, err := getJSON(v.r, foreignKey(seq), &row)
	return row, found, err
}

// OpenForeign answers how many foreign messages are not acknowledged, and
// the first of them.
func (v *View) OpenForeign() (int, *ForeignMessage, error) {
	seqs, err := keysUnder(v.r, []byte{prefixForeignOpen})
	if err != nil || len(seqs) == 0 {
		return 0, nil, err
	}
	var first ForeignMessage
	if _, err := getJSON(v.r, foreignKey(binary.BigEndian.Uint64([]byte(seqs[0]))), &first); err != nil {
		return 0, nil, fmt.Errorf("projections: cannot read foreign message: %w", err)
	}
	return len(seqs), &first, nil
}

// ReportKey is the key node's reports are signed with now ("" for none).
func (v *View) ReportKey(node string) (string, error) {
	raw, found, err := getRaw(v.r, reportKeyKey(node))
	if err != nil || !found {
		return "", err
	}
	return string(raw), nil
}

// agentReport admits a report that is the node's agent's word alone
// (events.AgentReport): of a node the log knows, signed by the report key
// it recorded.
func (f *folder) agentReport(rec events.Recorded) (foreign, err error) {
	name := events.Rights[rec.Event.EventType()].Name(rec.Event)
	if foreign, err := f.needNode(name, false); foreign != nil || err != nil {
		return foreign, err
	}
	if foreign, owned, err := f.admitOwned(rec, name); owned || err != nil {
		return foreign, err
	}
	key, err := f.reportKey(name)
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
