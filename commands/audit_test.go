package commands_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshctl/mesh/client"
	"github.com/meshctl/mesh/commands/core"
	"github.com/meshctl/mesh/compose"
	"github.com/meshctl/mesh/declaration"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/projections"
	"github.com/meshctl/mesh/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
)

// pushAndWait pushes node and waits for its agent's report.
// reportWait bounds a wait for a real agent's report. It bounds, it does
// not time: under the whole suite on two cores (a browser, a go build and
// fleets in other packages at once) a report was seen to take over 10 s.
const reportWait = 30 * time.Second

func (m *trustMesh) pushAndWait(node string) wire.PushedNode {
	m.t.Helper()
	r, err := m.h.Push.Push(m.ctx, wire.PushRequest{CommandID: wire.NewCommandID(), Node: node})
	m.must(err)
	p := r.Sent[0]
	m.must(client.WaitReport(m.ctx, m.h.Core.Store, m.h.Status, node, p.Digest, p.StreamSeq, reportWait))
	return p
}

// Rule 20: audit proves both directions, mesh-wide. On a log of signed
// reports it holds; a forged report and a forged declaration are named,
// exactly those two; a report the controller made in a node's name (it
// holds the MAC keys, not the node's report key) breaks that node's record.
func TestAuditProvesBothDirections(t *testing.T) {
	t.Parallel()
	m := newTrustMesh(t, false)
	ctx := m.ctx
	for _, n := range []string{"web-1", "web-2"} {
		_, err := m.h.Nodes.Enroll(ctx, wire.EnrollRequest{CommandID: wire.NewCommandID(), Name: n})
		m.must(err)
		m.runAgent(n, filepath.Join(t.TempDir(), n))
		m.pushAndWait(n)
		m.pushAndWait(n)
	}
	m.fence()
	a, err := m.h.History.Audit(ctx, wire.AuditRequest{})
	m.must(err)
	if !a.OK || len(a.Foreign) != 0 || a.Rate <= 0 || a.SignatureRate <= 0 {
		t.Fatalf("audit of an untouched log: %+v", a)
	}
	for _, n := range a.Nodes {
		// Two applies and the facts its agent reported at start.
		if strings.HasPrefix(n.Node, "web-") && (!n.OK || n.Declarations != 2 || n.Reports != 3 || len(n.ReportKeys) != 1) {
			t.Fatalf("audit of %s: %+v", n.Node, n)
		}
	}

	// A stranger on the open bus: a report for web-1, a declaration for web-2.
	nc := m.connect("web-1", nil)
	row, _, _ := m.h.Core.Proj.Node("web-1")
	report := nats.NewMsg(events.ReportSubject("web-1", "DeclarationApplied"))
	report.Data = envelope(t, events.NodeAggregate("web-1"), events.DeclarationApplied{Node: "web-1", Sequence: row.LastSent.Sequence, Digest: row.LastSent.Digest})
	m.must(nc.PublishMsg(report))
	forger, _ := nkeys.CreateAccount()
	sealed, err := declaration.Seal(forger, declaration.Declaration{Mesh: m.h.Core.Mesh, Node: "web-2", Sequence: 9, ComposedAt: time.Now(),
		Resources: []compose.Resource{}})
	m.must(err)
	sent := nats.NewMsg(events.DeclarationSubject("web-2"))
	sent.Data = envelope(t, events.NodeAggregate("web-2"), events.DeclarationSent{Node: "web-2", Sequence: 9, Digest: sealed.Digest(),
		Declaration: sealed.Bytes, Signature: sealed.Signature, Key: sealed.Key})
	m.must(nc.PublishMsg(sent))
	m.must(nc.Flush())
	m.fence()
	a, err = m.h.History.Audit(ctx, wire.AuditRequest{})
	m.must(err)
	if a.OK || len(a.Foreign) != 2 || a.Foreign[0].Subject != report.Subject || a.Foreign[1].Subject != sent.Subject {
		t.Fatalf("audit over a forged report and a forged declaration: %+v", a)
	}
	for _, n := range a.Nodes {
		if !n.OK {
			t.Fatalf("a foreign message broke %s's record, which it never entered: %+v", n.Node, n)
		}
	}
	one, err := m.h.History.Audit(ctx, wire.AuditRequest{Node: "web-2"})
	m.must(err)
	if one.OK || len(one.Foreign) != 1 || one.Foreign[0].Subject != sent.Subject {
		t.Fatalf("audit of web-2 names the forgery that touches it: %+v", one)
	}
	seqs := []uint64{a.Foreign[0].Seq, a.Foreign[1].Seq}
	_, err = m.h.Access.AckForeign(ctx, wire.AckRequest{CommandID: wire.NewCommandID(), Seqs: seqs})
	m.must(err)
	if a, err = m.h.History.Audit(ctx, wire.AuditRequest{}); err != nil || !a.OK || len(a.Foreign) != 2 {
		t.Fatalf("acknowledged, they are listed and the audit holds: %+v %v", a, err)
	}

	// The controller in the node's name: its MAC (which the controller can
	// make) and its report key named, but not that key's signature.
	key, err := m.viewReportKey("web-1")
	m.must(err)
	row, _, _ = m.h.Core.Proj.Node("web-1")
	madeUp := nats.NewMsg(events.ReportSubject("web-1", "DeclarationFailed"))
	madeUp.Data = envelope(t, events.NodeAggregate("web-1"), events.DeclarationFailed{Node: "web-1", Sequence: row.LastSent.Sequence, Digest: row.LastSent.Digest,
		Failed: []events.ResourceFailure{{Path: "/x", Reason: "made up"}}})
	madeUp.Header.Set(events.MACHeader, declaration.MAC(m.h.Core.Keys.NodeMAC("web-1"), madeUp.Subject, madeUp.Data))
	madeUp.Header.Set(events.SignerHeader, key)
	madeUp.Header.Set(events.SignatureHeader, "bm90IGEgc2lnbmF0dXJl")
	ack, err := m.h.Core.Store.JetStream().PublishMsg(ctx, madeUp)
	m.must(err)
	m.fence()
	one, err = m.h.History.Audit(ctx, wire.AuditRequest{Node: "web-1"})
	m.must(err)
	if one.OK || one.Nodes[0].BreakSeq != ack.Sequence || !strings.Contains(one.Nodes[0].Break, "does not verify against "+key) {
		t.Fatalf("a report the node's agent did not sign: %+v", one.Nodes[0])
	}
}

func (m *trustMesh) viewReportKey(node string) (string, error) {
	var key string
	err := m.h.Core.Proj.Read(func(v *projections.View) (err error) { key, err = v.ReportKey(node); return err })
	return key, err
}

// Rule 19's fifth part: an event of a type this controller does not know,
// with the controller's MAC, means a newer controller wrote it. The
// controller keeps serving, refuses writes in one sentence, status says so,
// and a restart starts rather than wedging.
func TestANewerControllersEventMakesTheControllerReadOnly(t *testing.T) {
	t.Parallel()
	m := newTrustMesh(t, true)
	ctx := m.ctx
	_, err := m.h.Nodes.Enroll(ctx, wire.EnrollRequest{CommandID: wire.NewCommandID(), Name: "web-1"})
	m.must(err)
	newer := nats.NewMsg("mesh.ev.node.web-1.NodeTeleported")
	newer.Data = []byte(`{"id":"x/0","type":"NodeTeleported","version":1,"aggregate":{"kind":"node","id":"web-1"},"occurred_at":"2026-12-03T00:00:00Z","command_id":"x","data":{}}`)
	newer.Header.Set(events.MACHeader, declaration.MAC(m.h.Core.Keys.LogMAC(), newer.Subject, newer.Data))
	ack, err := m.h.Core.Store.JetStream().PublishMsg(ctx, newer)
	m.must(err)
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := m.h.Core.Proj.WaitFor(wctx, ack.Sequence); !errors.Is(err, events.ErrNewer) {
		t.Fatalf("the fold over a newer controller's event: %v", err)
	}
	for range 2 { // before and after a restart
		_, err = m.h.Nodes.Enroll(ctx, wire.EnrollRequest{CommandID: wire.NewCommandID(), Name: "web-2"})
		if !errors.Is(err, wire.ErrReadOnly) || !strings.Contains(err.Error(), "this controller is older than the log: event") ||
			!strings.Contains(err.Error(), "NodeTeleported it does not know; upgrade it") {
			t.Fatalf("a write on a controller older than its log: %v", err)
		}
		s, err := m.h.Status.Status(ctx, wire.StatusRequest{})
		if err != nil || s.Well || len(s.Nodes) != 1 || !strings.Contains(strings.Join(s.Causes, "\n"), "older than the log") {
			t.Fatalf("status of a controller older than its log: %+v %v", s, err)
		}
		m.start()
	}
}

// Issue 11, part 8: a command whose event landed but whose fold it could not
// confirm says what landed, not that it failed.
func TestACommandThatActedSaysSo(t *testing.T) {
	t.Parallel()
	m := newTrustMesh(t, false)
	m.ctrl.Proj.Stop() // the fold stops: nothing will confirm
	ctx, cancel := context.WithTimeout(m.ctx, 300*time.Millisecond)
	defer cancel()
	_, err := m.h.Nodes.Enroll(ctx, wire.EnrollRequest{CommandID: wire.NewCommandID(), Name: "web-1"})
	if !errors.Is(err, core.ErrNotFolded) || !strings.Contains(err.Error(), "NodeEnrolled landed at event 2") {
		t.Fatalf("enrol with the fold stopped: %v", err)
	}
	if v, err := m.h.Core.Store.Version(m.ctx, events.NodeAggregate("web-1")); err != nil || v != 2 {
		t.Fatalf("the enrolment is recorded: version %d, %v", v, err)
	}
}

// A refusal that claims the node applied a sequence near the end of uint64
// is the node's own word (signed by its report key), and is recorded; the
// next push is numbered after what was sent, not wrapped to 0.
func TestAnImplausibleHighestDoesNotWrapTheSequence(t *testing.T) {
	t.Parallel()
	m := newTrustMesh(t, false)
	ctx := m.ctx
	_, err := m.h.Nodes.Enroll(ctx, wire.EnrollRequest{CommandID: wire.NewCommandID(), Name: "web-1"})
	m.must(err)
	first, err := m.h.Push.Push(ctx, wire.PushRequest{CommandID: wire.NewCommandID(), Node: "web-1"})
	m.must(err)
	sent := first.Sent[0]
	// The node's own key, recorded as its agent records it, then its refusal.
	kp, _ := nkeys.CreateUser()
	signer, _ := declaration.NewSigner(kp)
	bus, _ := nkeys.FromSeed([]byte(m.join("web-1").Seed))
	mac, _ := declaration.ReportMACKey(bus)
	js := m.h.Core.Store.JetStream()
	for _, ev := range []events.Event{
		events.ReportKeyRecorded{Node: "web-1", Key: signer.PublicKey()},
		events.DeclarationRefused{Node: "web-1", Sequence: sent.Sequence, Digest: sent.Digest, Reason: "replay", Highest: 1<<64 - 2},
	} {
		msg := nats.NewMsg(events.ReportSubject("web-1", ev.EventType()))
		msg.Data = envelope(t, events.NodeAggregate("web-1"), ev)
		msg.Header.Set(events.MACHeader, declaration.MAC(mac, msg.Subject, msg.Data))
		msg.Header.Set(events.SignerHeader, signer.PublicKey())
		msg.Header.Set(events.SignatureHeader, signer.Sign(msg.Data))
		_, err := js.PublishMsg(ctx, msg)
		m.must(err)
	}
	m.fence()
	if row, _, _ := m.h.Core.Proj.Node("web-1"); row.LastReport == nil || row.LastReport.Highest != 1<<64-2 {
		t.Fatalf("the node's refusal was not recorded: %+v", row.LastReport)
	}
	next, err := m.h.Push.Push(ctx, wire.PushRequest{CommandID: wire.NewCommandID(), Node: "web-1"})
	m.must(err)
	if p := next.Sent[0]; p.Sequence != sent.Sequence+1 || !strings.Contains(p.Note, "no mesh has sent") {
		t.Fatalf("the push after an implausible highest: %+v", p)
	}
}
