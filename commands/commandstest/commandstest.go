// Package commandstest holds what the tests of the controller and of its
// services share: a controller started on a real embedded bus, a node
// enrolled over the bus, an error's code, a home's key copied, a kill and a
// start, what must hold after a fault, and what the disk and the log hold.
// It lives in one place so that the tests beside each service and the
// controller's own tests call the same helper, never a copy.
package commandstest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/meshctl/mesh/agent/agenttest"
	"github.com/meshctl/mesh/client"
	"github.com/meshctl/mesh/commands"
	"github.com/meshctl/mesh/embedded"
	"github.com/meshctl/mesh/embedded/embeddedtest"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/events/store"
	"github.com/meshctl/mesh/wire"
	"github.com/nats-io/nats.go"
)

// Controller starts a controller in a fresh home on srv and is a client of
// it over its own connection, as an operator's.
func Controller(t *testing.T, srv *embedded.Server) *client.Client {
	t.Helper()
	return ControllerIn(t, srv, t.TempDir())
}

// ControllerIn is Controller with the controller's home at home.
func ControllerIn(t *testing.T, srv *embedded.Server, home string) *client.Client {
	t.Helper()
	nc := embeddedtest.Conn(t, srv)
	c, err := commands.StartController(context.Background(), nc, commands.ControllerConfig{Home: home})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &client.Client{NC: embeddedtest.Conn(t, srv), Where: srv.ClientURL()}
}

// Enroll enrols name with caps over the bus, as mesh node enroll does.
func Enroll(c *client.Client, name string, caps ...string) (wire.Changed, error) {
	var out wire.Changed
	err := c.Call(context.Background(), wire.SubjectNodeEnroll,
		wire.EnrollRequest{CommandID: wire.NewCommandID(), Name: name, Capabilities: caps}, &out)
	return out, err
}

// Code is the code of a refusal the controller answered, or "" for any
// other error: tests pin the code, not the wording.
func Code(err error) string {
	var re *client.RemoteError
	if errors.As(err, &re) {
		return re.Code
	}
	return ""
}

// WriteKey copies the controller key of one home into another, as a
// restore places it.
func WriteKey(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(from, commands.KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(to, commands.KeyFile), b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// CheckAfterFault holds what must hold after any fault: verify passes, each
// node's declarations in the log have distinct, rising sequences, and a push
// leaves every node sent what it would be sent now.
func CheckAfterFault(t *testing.T, h *commands.Controller) {
	t.Helper()
	ctx := context.Background()
	v, err := h.Status.VerifyProjections(ctx, wire.FoldRequest{})
	if err != nil || v.Diff != "" {
		t.Fatalf("verify after the fault: %v\n%s", err, v.Diff)
	}
	last := map[string]uint64{}
	err = h.Core.Store.Read(ctx, store.ReadOptions{Filter: "mesh.ev.node.*.DeclarationSent"}, func(m store.Msg) error {
		_, ev, err := events.Read(m.Subject, m.Data)
		if err != nil {
			return fmt.Errorf("event %d: %w", m.Seq, err)
		}
		sent := ev.(events.DeclarationSent)
		if sent.Sequence <= last[sent.Node] {
			return fmt.Errorf("event %d: %s sequence %d after %d", m.Seq, sent.Node, sent.Sequence, last[sent.Node])
		}
		last[sent.Node] = sent.Sequence
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Push.Push(ctx, wire.PushRequest{CommandID: wire.NewCommandID(), Behind: true}); err != nil {
		t.Fatalf("the push after the fault: %v", err)
	}
	s, err := h.Status.Status(ctx, wire.StatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range s.Nodes {
		if n.ContentDigest != n.WouldSend {
			t.Fatalf("%s was not sent what it would be sent now after the push: %+v", n.Name, n)
		}
	}
}

// StartOn starts a controller on home over a connection of its own, to be
// killed by closing that connection.
func StartOn(t *testing.T, srv *embedded.Server, home string) (*commands.Controller, *nats.Conn) {
	t.Helper()
	nc, err := srv.Connect()
	if err != nil {
		t.Fatal(err)
	}
	ctrl, err := commands.StartController(context.Background(), nc, commands.ControllerConfig{Home: home})
	if err != nil {
		t.Fatalf("the start after a kill: %v", err)
	}
	return ctrl, nc
}

// OnDisk says whether any file under dir holds b.
func OnDisk(t *testing.T, dir string, b []byte) bool {
	t.Helper()
	found := false
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || found {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return nil // a file the server removed meanwhile
		}
		found = bytes.Contains(data, b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

// LastSent is the newest declaration sent to node.
func LastSent(t *testing.T, m *agenttest.Mesh, node string) events.DeclarationSent {
	t.Helper()
	msg, found, err := m.H.Core.Store.Last(m.Ctx, events.DeclarationSubject(node))
	m.Must(err)
	if !found {
		t.Fatalf("nothing was sent to %s", node)
	}
	_, ev, err := events.Decode(msg.Data)
	m.Must(err)
	return ev.(events.DeclarationSent)
}
