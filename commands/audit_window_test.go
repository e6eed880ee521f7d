package commands_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshctl/mesh/client"
	"github.com/meshctl/mesh/compose"
	"github.com/meshctl/mesh/declaration"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/wire"
)

// Rule 20 with windows (declaration.SealMany): a push to three nodes signs
// them as one window, each agent opens its own declaration alone and
// applies it, and audit proves every send. A send the controller wrote
// (its MAC, its signature over a window) whose proof was changed breaks
// that node's record, and only that node's: the window's other send
// stands. Fails when audit checks a window's signature against the bytes
// rather than the root, or does not walk the proof.
func TestAuditProvesSendsSignedAsAWindow(t *testing.T) {
	t.Parallel()
	m := newTrustMesh(t, false)
	ctx := m.ctx
	nodes := []string{"web-1", "web-2", "web-3"}
	for _, n := range nodes {
		_, err := m.h.Nodes.Enroll(ctx, wire.EnrollRequest{CommandID: wire.NewCommandID(), Name: n})
		m.must(err)
		m.runAgent(n, filepath.Join(t.TempDir(), n))
	}
	r, err := m.h.Push.Push(ctx, wire.PushRequest{CommandID: wire.NewCommandID()})
	m.must(err)
	if len(r.Sent) != len(nodes) {
		t.Fatalf("push: %+v", r)
	}
	for _, p := range r.Sent {
		m.must(client.WaitReport(ctx, m.h.Core.Store, m.h.Status, p.Node, p.Digest, p.StreamSeq, reportWait))
	}
	m.fence()
	a, err := m.h.History.Audit(ctx, wire.AuditRequest{})
	m.must(err)
	if !a.OK {
		t.Fatalf("audit of a push signed as one window: %+v", a)
	}

	// The next sends of web-1 and web-2, signed as a window by the
	// controller's key; web-1's proof changed in one byte.
	var ds []declaration.Declaration
	for _, n := range nodes[:2] {
		row, _, err := m.h.Core.Proj.Node(n)
		m.must(err)
		ds = append(ds, declaration.Declaration{Mesh: m.h.Core.Mesh, Node: n, Sequence: row.LastSent.Sequence + 1,
			ComposedAt: time.Now(), Previous: row.LastSent.Digest, Resources: []compose.Resource{}})
	}
	sealed := m.h.Core.Signer.SealMany(ds)
	sealed[0].Proof[len(sealed[0].Proof)-1] ^= 1
	for i, n := range nodes[:2] {
		row, _, err := m.h.Core.Proj.Node(n)
		m.must(err)
		_, err = m.h.Core.Store.Append(ctx, events.NodeAggregate(n), row.Version, wire.NewCommandID(), events.DeclarationSent{
			Node: n, Sequence: ds[i].Sequence, Digest: sealed[i].Digest(), ContentDigest: ds[i].ContentDigest(), By: "push",
			Declaration: sealed[i].Bytes, Signature: sealed[i].Signature, Key: sealed[i].Key, Proof: sealed[i].Proof})
		m.must(err)
	}
	m.fence()
	a, err = m.h.History.Audit(ctx, wire.AuditRequest{})
	m.must(err)
	for _, n := range a.Nodes {
		switch n.Node {
		case "web-1":
			if n.OK || !strings.Contains(n.Break, "does not verify") {
				t.Fatalf("web-1's send with a changed proof: %+v", n)
			}
		case "web-2", "web-3":
			if !n.OK {
				t.Fatalf("%s's record broke with its window's other send: %+v", n.Node, n)
			}
		}
	}
}
