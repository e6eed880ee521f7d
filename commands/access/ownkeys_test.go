package access_test

import (
	"strings"
	"testing"

	"github.com/meshctl/mesh/agent/agenttest"
	"github.com/meshctl/mesh/commands/commandstest"
	"github.com/meshctl/mesh/declaration"
	"github.com/meshctl/mesh/embedded/embeddedtest"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/events/store"
	"github.com/meshctl/mesh/secret"
	"github.com/meshctl/mesh/wire"
	"github.com/nats-io/nkeys"
)

// Issue 29: a node that enrolled with a token made its keys on its machine,
// so the controller key (all the operator's home and a backup hold) can
// neither open what is sealed to it nor make its word. The attack of the
// issue: with the controller key, record a new report key for app-1 and
// report "applied" while its agent is stopped. Before, status said
// current; now each forgery is set aside and app-1 stays behind.
func TestAnOperatorsHomeCannotMakeANodesWord(t *testing.T) {
	m := agenttest.New(t)
	m.Enroll("db-1", "linux")
	m.Enroll("app-1", "linux")
	m.Register("postgres.json")
	m.Register("app.json")
	m.Assign("db-1", "postgres", map[string]string{"password": "hunter2-in-the-clear"})
	m.Assign("app-1", "app", nil)
	m.Agent("db-1")
	_, stopApp := m.Agent("app-1")
	for _, s := range m.Push("").Sent {
		m.Report(s.Node, s.Digest)
	}

	// What is sealed to db-1 opens with none of the controller's keys.
	sent := commandstest.LastSent(t, m, "db-1")
	d, err := declaration.Open(declaration.Sealed{Bytes: sent.Declaration, Signature: sent.Signature, Key: sent.Key, Proof: sent.Proof}, m.H.Core.PublicKey, m.H.Core.Mesh, "db-1")
	m.Must(err)
	sealed := 0
	for _, r := range d.Content().Resources {
		if r.Sealed == nil {
			continue
		}
		sealed++
		if !secret.IsSealedTo(r.Sealed.Box) {
			t.Fatalf("%s is sealed under a key the controller derives, not to db-1's own", r.Path)
		}
		if _, err := secret.Open(m.H.Core.Keys.NodeSeal("db-1"), secret.FilePlace("db-1", r.Path), r.Sealed.Box); err == nil {
			t.Fatalf("the controller's derived key opens %s, sealed to db-1", r.Path)
		}
	}
	if sealed == 0 {
		t.Fatal("db-1's declaration seals nothing: the test proves nothing")
	}

	// app-1's agent stops; a change is pushed that it never applies.
	stopApp()
	m.Assign("app-1", "app", map[string]string{"workers": "7"})
	push := m.Push("app-1").Sent[0]
	forger, _ := nkeys.CreateUser()
	signer, _ := declaration.NewSigner(forger)
	forged := []events.Event{
		events.ReportKeyRecorded{Node: "app-1", Key: signer.PublicKey()},
		events.DeclarationApplied{Node: "app-1", Sequence: push.Sequence, Digest: push.Digest},
	}
	// With the MAC the controller key derives for app-1 (what made the
	// forgery fold before), and without one (a signature alone).
	for i, ev := range forged {
		for j, mac := range [][]byte{m.H.Core.Keys.NodeMAC("app-1"), nil} {
			_, err := m.H.Core.Store.Report(m.Ctx, "app-1", "forged-"+string(rune('a'+i))+string(rune('a'+j)), ev, store.Sealing{Signer: signer, MAC: mac})
			m.Must(err)
		}
	}
	embeddedtest.Eventually(t, "every forgery set aside", func() bool {
		f, err := m.H.Access.ListForeign(m.Ctx, wire.Empty{})
		m.Must(err)
		return len(f.Foreign) == 4
	})
	if st := m.Status()["app-1"]; st.State == wire.StateCurrent {
		t.Fatalf("app-1 reads current on reports its agent never made: %+v", st)
	}
	a, err := m.H.History.Audit(m.Ctx, wire.AuditRequest{Node: "app-1"})
	m.Must(err)
	if n := a.Nodes[0]; !n.OwnKeys || len(n.ReportKeys) != 1 || !n.OK || len(a.Foreign) != 4 {
		t.Fatalf("audit of app-1: %+v", a)
	}
	// And its old, derived identity is no longer its join: a join string
	// again is refused, naming the re-key.
	if _, err := m.H.Access.Join(m.Ctx, wire.NameRequest{Name: "app-1"}); err == nil || !strings.Contains(err.Error(), "mesh node rekey app-1") {
		t.Fatalf("a join string for a node with its own keys: %v", err)
	}
	m.Verified()
}
