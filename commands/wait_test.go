package commands_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshctl/mesh/agent/agenttest"
	"github.com/meshctl/mesh/embedded/embeddedtest"
	"github.com/meshctl/mesh/events/store"

	"github.com/meshctl/mesh/client"
	"github.com/meshctl/mesh/commands"
	"github.com/meshctl/mesh/compose"
	"github.com/meshctl/mesh/declaration"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/wire"
	"github.com/nats-io/nkeys"
)

// push --wait: returns on applied, errors at once with the node's reason on
// failed or refused, and on timeout says the node may still be converging.
func TestWaitForTheNodesReport(t *testing.T) {
	t.Parallel()
	m := agenttest.New(t)
	m.Enroll("web-1")
	m.Enroll("idle")
	root, _ := m.Agent("web-1")
	s := m.Push("web-1").Sent[0]
	if err := client.WaitReport(m.Ctx, m.H.Core.Store, m.H.Status, "web-1", s.Digest, s.StreamSeq, 10*time.Second); err != nil {
		t.Fatalf("applied: %v", err)
	}

	outside := t.TempDir()
	m.Must(os.Symlink(outside, filepath.Join(root, "link")))
	d, err := m.H.Push.Declare(m.Ctx, wire.DeclareRequest{CommandID: wire.NewCommandID(), Node: "web-1", File: "f.json",
		Body: `{"resources":[{"kind":"file","path":"/link/x","mode":"0644","content":"x"}]}`})
	m.Must(err)
	start := time.Now()
	err = client.WaitReport(m.Ctx, m.H.Core.Store, m.H.Status, "web-1", d.Digest, d.StreamSeq, 30*time.Second)
	if err == nil || !strings.Contains(err.Error(), "failed sequence") || !strings.Contains(err.Error(), "/link/x") || time.Since(start) > 10*time.Second {
		t.Fatalf("failed: %v after %s", err, time.Since(start))
	}

	forger, _ := nkeys.CreateAccount()
	ev := agenttest.Sealed(t, forger, declaration.Declaration{Mesh: m.H.Core.Mesh, Node: "web-1", Sequence: 50, ComposedAt: time.Now(),
		Resources: []compose.Resource{}})
	st, _ := m.H.Core.Store.State(m.Ctx)
	m.Publish("web-1", ev)
	err = client.WaitReport(m.Ctx, m.H.Core.Store, m.H.Status, "web-1", ev.Digest, st.LastSeq+1, 30*time.Second)
	if err == nil || !strings.Contains(err.Error(), "refused sequence 50") || !strings.Contains(err.Error(), "signature") {
		t.Fatalf("refused: %v", err)
	}

	idle := m.Push("idle").Sent[0]
	err = client.WaitReport(m.Ctx, m.H.Core.Store, m.H.Status, "idle", idle.Digest, idle.StreamSeq, 300*time.Millisecond)
	if !errors.Is(err, client.ErrStillConverging) || !strings.Contains(err.Error(), "may still be converging") {
		t.Fatalf("timeout: %v", err)
	}
}

// The controller stopped in the middle of a push: every declaration an agent
// applied is in the log, and a push by a controller started again converges.
func TestControllerStoppedMidPushConvergesOnTheNextPush(t *testing.T) {
	t.Parallel() // its own bus and home; mostly waiting: beside the others
	srv := embeddedtest.Server(t)
	home := t.TempDir()
	start := func() *commands.Controller {
		c, err := commands.StartController(context.Background(), embeddedtest.Conn(t, srv), commands.ControllerConfig{Home: home})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	ctrl := start()
	m := &agenttest.Mesh{T: t, Srv: srv, Ctrl: ctrl, H: ctrl, Ctx: context.Background(), Home: home}
	var nodes []string
	for i := range 30 {
		n := "n" + string(rune('a'+i%26)) + string(rune('a'+i/26))
		nodes = append(nodes, n)
		m.Enroll(n)
		m.Agent(n)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		ctrl.Push.Push(ctx, wire.PushRequest{CommandID: wire.NewCommandID()})
	}()
	// Stop it as soon as the first declaration is on the stream.
	embeddedtest.Eventually(t, "the first declaration on the stream", func() bool {
		_, found, _ := m.H.Core.Store.Last(m.Ctx, "mesh.ev.node.*.DeclarationSent")
		return found
	})
	cancel()
	ctrl.Close()
	<-done

	ctrl = start()
	defer ctrl.Close()
	m.H, m.Ctrl = ctrl, ctrl
	r := m.Push("")
	if len(r.Sent) != len(nodes) {
		t.Fatalf("the second push sent %d of %d: %+v", len(r.Sent), len(nodes), r.Unsent)
	}
	for _, s := range r.Sent {
		if rep := m.Report(s.Node, s.Digest); rep.Outcome != "applied" {
			t.Fatalf("%s: %+v", s.Node, rep)
		}
	}
	// Every digest any agent reported on is a declaration in the log.
	sent := map[string]bool{}
	m.Must(m.H.Core.Store.Read(m.Ctx, store.ReadOptions{Filter: events.DeclarationSubject("*")}, func(msg store.Msg) error {
		_, ev, err := events.Decode(msg.Data)
		if err == nil {
			sent[ev.(events.DeclarationSent).Digest] = true
		}
		return err
	}))
	m.Must(m.H.Core.Store.Read(m.Ctx, store.ReadOptions{Filter: "mesh.rp.>"}, func(msg store.Msg) error {
		_, ev, err := events.Decode(msg.Data)
		if a, ok := ev.(events.DeclarationApplied); ok && !sent[a.Digest] {
			t.Errorf("%s applied %s, which is not in the log", a.Node, a.Digest)
		}
		return err
	}))
}
