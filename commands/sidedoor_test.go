package commands_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meshctl/mesh/agent"
	"github.com/meshctl/mesh/commands"
	"github.com/meshctl/mesh/embedded/embeddedtest"
	"github.com/meshctl/mesh/events"
	"github.com/nats-io/nats.go"
)

// Issue 29, "no side doors": app-1, as itself on a closed bus, publishes
// its own report with a reply subject aimed at db-1's declaration subject.
// The bus lets it (ARCHITECTURE.md, "One thing the bus cannot refuse"), and
// JetStream's acknowledgement lands there as the newest message. db-1's
// agent, started after, applies db-1's newest declaration all the same,
// and goes on following its declarations with junk on top. Fails when an
// agent acts on (refuses and stops at) a message the controller did not
// sign.
func TestJunkAimedAtADeclarationSubjectDoesNotHoldTheNode(t *testing.T) {
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
			last, found, err := m.h.Store.Last(ctx, subject)
			top = last.Seq
			return err == nil && found && strings.Contains(string(last.Data), `"stream"`)
		})
		return top
	}
	seq := junk()
	// The fold sets it aside: it names db-1 and is no event of the controller's.
	embeddedtest.Eventually(t, "the junk to be listed foreign", func() bool {
		l, err := m.h.ListForeign(ctx, commands.Empty{})
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

// declare sends node a declaration of one file, /etc/secret, holding content.
func (m *closedMesh) declare(node, content string) {
	m.t.Helper()
	if _, err := m.h.Declare(context.Background(), commands.DeclareRequest{CommandID: commands.NewCommandID(), Node: node, File: "f.json",
		Body: `{"resources":[{"kind":"file","path":"/etc/secret","mode":"0600","content":"` + content + `"}]}`}); err != nil {
		m.t.Fatal(err)
	}
}
