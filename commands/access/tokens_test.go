package access_test

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/meshctl/mesh/agent"
	"github.com/meshctl/mesh/agent/agenttest"
	"github.com/meshctl/mesh/projections"
	"github.com/meshctl/mesh/wire"
	"github.com/nats-io/nats.go"
)

// Issue 29: a fleet enrols itself with one token. Three machines at once
// with one three-use token each enrol under their own name with its
// labels; a fourth is refused, naming why; a token with uses left can be
// revoked after a use. Fails when a use does not move the token's version
// (the second use was refused for ever as "changed by other writes", and
// so was a revoke).
func TestOneTokenEnrolsAFleet(t *testing.T) {
	m := agenttest.New(t)
	token := func(uses int) string {
		t.Helper()
		r, err := m.H.Access.CreateToken(m.Ctx, wire.TokenRequest{CommandID: wire.NewCommandID(), Uses: uses, Labels: map[string]string{"zone": "eu-1"}})
		m.Must(err)
		return r.Identity.Token
	}
	enrol := func(tok, node string) error {
		j := agent.Join{Mesh: m.H.Core.Mesh, Bus: m.Srv.ClientURL(), Node: node, Key: m.H.Core.PublicKey, Token: tok}
		_, err := agent.Enrol(m.Ctx, j, filepath.Join(t.TempDir(), "state"), func(o ...nats.Option) (*nats.Conn, error) {
			return nats.Connect(m.Srv.ClientURL(), o...)
		}, slog.New(slog.DiscardHandler))
		return err
	}
	fleet := token(3)
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range errs {
		wg.Go(func() { errs[i] = enrol(fleet, fmt.Sprintf("n%d", i+1)) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("n%d enrolling with the fleet's token: %v", i+1, err)
		}
	}
	nodes, err := m.H.Nodes.ListNodes(m.Ctx, wire.ListRequest{})
	m.Must(err)
	if len(nodes.Nodes) != 3 {
		t.Fatalf("nodes after three uses: %+v", nodes.Nodes)
	}
	for _, n := range nodes.Nodes {
		if n.Labels["zone"] != "eu-1" {
			t.Fatalf("%s lacks the token's label: %+v", n.Name, n)
		}
	}
	if err := enrol(fleet, "n4"); err == nil || !strings.Contains(err.Error(), "spent") {
		t.Fatalf("a fourth use of a three-use token: %v", err)
	}
	more := token(2)
	m.Must(enrol(more, "n5"))
	id, _, _ := strings.Cut(more, ".")
	if c, err := m.H.Access.RevokeToken(m.Ctx, wire.NameRequest{Name: id}); err != nil || !c.Changed {
		t.Fatalf("revoking a token with a use left: %+v %v", c, err)
	}
	var tk projections.Token
	m.Must(m.H.Core.Proj.Read(func(v *projections.View) (err error) { tk, _, err = v.Token(id); return err }))
	if left, why := tk.Left(m.H.Core.Now()); left != 0 || !strings.Contains(why, "revoked") {
		t.Fatalf("after the revoke: %d left (%s)", left, why)
	}
}
