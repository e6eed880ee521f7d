package commands_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meshctl/mesh/agent"
	"github.com/meshctl/mesh/embedded/embeddedtest"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/events/store"
	"github.com/meshctl/mesh/wire"
	"github.com/nats-io/nats.go"
)

// Issue 29, "no side doors": app-1, as itself on a closed bus, publishes
// its own report with a reply subject aimed at db-1's declaration subject.
// The bus lets it (docs/security.md, "One thing the bus cannot refuse"), and
// JetStream's acknowledgement lands there as the newest message. db-1's
// agent, started after, applies db-1's newest declaration all the same,
// and goes on following its declarations with junk on top. Fails when an
// agent acts on (refuses and stops at) a message the controller did not
// sign.
func TestJunkAimedAtADeclarationSubjectDoesNotHoldTheNode(t *testing.T) {
	t.Parallel()
	m := newClosedMesh(t, 0)
	ctx := context.Background()
	app := m.enrollAndDeclare("app-1")
	db := m.enrollAndDeclare("db-1")
	m.declare("db-1", "v2") // the newest: the one the agent must apply
	subject := events.DeclarationSubject("db-1")

	attacker, err := m.connectAs(app, nil)
	if err != nil {
		t.Fatal(err)
	}
	junk := func() uint64 {
		t.Helper()
		msg := nats.NewMsg(events.ReportSubject("app-1", "DeclarationApplied"))
		msg.Data, msg.Reply = []byte("{}"), subject
		if err := attacker.PublishMsg(msg); err != nil {
			t.Fatal(err)
		}
		var top uint64
		embeddedtest.Eventually(t, "the acknowledgement to land on db-1's declaration subject", func() bool {
			last, found, err := m.h.Core.Store.Last(ctx, subject)
			top = last.Seq
			return err == nil && found && strings.Contains(string(last.Data), `"stream"`)
		})
		return top
	}
	seq := junk()
	// The fold sets it aside: it names db-1 and is no event of the controller's.
	embeddedtest.Eventually(t, "the junk to be listed foreign", func() bool {
		l, err := m.h.Access.ListForeign(ctx, wire.Empty{})
		return err == nil && len(l.Foreign) > 0 && l.Foreign[len(l.Foreign)-1].Seq == seq
	})

	nc, err := m.connectAs(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	a, err := agent.Open(ctx, nc, agent.Config{Join: db, Root: root})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- a.Run(runCtx) }()
	t.Cleanup(func() { stop(); <-ran })
	holds := func(content string) {
		t.Helper()
		embeddedtest.Eventually(t, "db-1's agent to apply "+content, func() bool {
			b, err := os.ReadFile(filepath.Join(root, "etc/secret"))
			return err == nil && string(b) == content
		})
	}
	holds("v2")

	// Following: junk on top while it runs, then a new declaration.
	junk()
	m.declare("db-1", "v3")
	holds("v3")
	junk()
	m.declare("db-1", "v4")
	holds("v4")
}

// The door an agent asks through is no side door: the controller answers a
// node's newest declaration only to an inbox, never to a subject the stream
// keeps, and a node may ask only for its own (the permission matrix holds
// the second).
func TestTheNewestDeclarationIsAnsweredOnlyToAnInbox(t *testing.T) {
	t.Parallel()
	m := newClosedMesh(t, 0)
	ctx := context.Background()
	app := m.enrollAndDeclare("app-1")
	m.enrollAndDeclare("db-1")
	subject := events.DeclarationSubject("db-1")
	before, _, err := m.h.Core.Store.Last(ctx, subject)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := m.connectAs(app, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.PublishRequest(events.NewestSubject("app-1"), subject, nil); err != nil {
		t.Fatal(err)
	}
	// Asked properly, twice, after it: the controller takes its requests in
	// order, so by the second answer the first request was long settled.
	own, _, err := m.h.Core.Store.Last(ctx, events.DeclarationSubject("app-1"))
	if err != nil {
		t.Fatal(err)
	}
	st, _ := store.AttachNode(nc, "")
	for range 2 {
		got, found, err := st.Newest(ctx, "app-1")
		if err != nil || !found || got.Seq != own.Seq || got.Subject != own.Subject || string(got.Data) != string(own.Data) {
			t.Fatalf("app-1 asking for its newest declaration: event %d on %s, found %v, %v; want event %d", got.Seq, got.Subject, found, err, own.Seq)
		}
	}
	if after, _, err := m.h.Core.Store.Last(ctx, subject); err != nil || after.Seq != before.Seq {
		t.Fatalf("an answer aimed at db-1's declaration subject landed there: event %d, was %d (%v)", after.Seq, before.Seq, err)
	}
}

// declare sends node a declaration of one file, /etc/secret, holding content.
func (m *closedMesh) declare(node, content string) {
	m.t.Helper()
	if _, err := m.h.Push.Declare(context.Background(), wire.DeclareRequest{CommandID: wire.NewCommandID(), Node: node, File: "f.json",
		Body: `{"resources":[{"kind":"file","path":"/etc/secret","mode":"0600","content":"` + content + `"}]}`}); err != nil {
		m.t.Fatal(err)
	}
}
