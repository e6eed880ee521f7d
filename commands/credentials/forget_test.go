package credentials_test

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/meshctl/mesh/commands/commandstest"
	"github.com/meshctl/mesh/commands/secrets"
	"github.com/meshctl/mesh/embedded/embeddedtest"

	"github.com/meshctl/mesh/commands"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/events/store"
	"github.com/meshctl/mesh/secret"
	"github.com/meshctl/mesh/wire"
)

// Rule 21, forgetting: a forgotten version's salt is gone from the bucket
// and from the bus's disk, so nothing can open that value again; a version
// not forgotten still composes; forgetting again is nothing to do;
// forgetting the current value makes the node say to set it again; audit
// still holds. Fails when the salt is not erased, or only unlinked (the
// disk scan finds it).
func TestForgettingASecret(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	srv := embeddedtest.ServerIn(t, dir)
	nc, err := srv.Connect()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(err)
	home := t.TempDir()
	ctrl, err := commands.StartController(ctx, nc, commands.ControllerConfig{Home: home})
	must(err)
	t.Cleanup(func() { ctrl.Close() })
	h := ctrl
	data, err := os.ReadFile("../../examples/postgres.json")
	must(err)
	_, err = h.Modules.RegisterModule(ctx, wire.RegisterRequest{CommandID: wire.NewCommandID(), File: "postgres.json", Manifest: string(data)})
	must(err)
	_, err = h.Nodes.Enroll(ctx, wire.EnrollRequest{CommandID: wire.NewCommandID(), Name: "db", Capabilities: []string{"linux"}})
	must(err)
	for _, pw := range []string{"leaked-once", "second"} {
		_, err = h.Nodes.Assign(ctx, wire.AssignRequest{CommandID: wire.NewCommandID(), Node: "db", Module: "postgres", Settings: map[string]string{"password": pw}})
		must(err)
	}
	// The salt of each version, from the log, and its bytes from the bucket.
	var salts []string
	must(h.Core.Store.Read(ctx, store.ReadOptions{Filter: events.NodeAggregate("db").Filter()}, func(m store.Msg) error {
		if _, ev, err := events.Decode(m.Data); err == nil {
			if a, ok := ev.(events.ModuleAssigned); ok {
				s, err := secret.ParseSetting(a.Settings["password"])
				must(err)
				salts = append(salts, s.Key)
			}
		}
		return nil
	}))
	stream, err := h.Core.Store.JetStream().Stream(ctx, secrets.SecretsStream)
	must(err)
	e, err := stream.GetLastMsgForSubject(ctx, "mesh.secret."+salts[0])
	must(err)
	salt := e.Data
	if len(salts) != 2 || !commandstest.OnDisk(t, dir, salt) {
		t.Fatalf("salts %v; the first on disk before forgetting: %v (the scan would prove nothing)", salts, commandstest.OnDisk(t, dir, salt))
	}
	forget := func(version int) wire.Forgotten {
		t.Helper()
		f, err := h.Credentials.ForgetSecret(ctx, wire.ForgetRequest{CommandID: wire.NewCommandID(), Node: "db", Module: "postgres", Setting: "password", Version: version})
		must(err)
		return f
	}
	state := func() wire.NodeStatus {
		t.Helper()
		s, err := h.Status.Status(ctx, wire.StatusRequest{})
		must(err)
		return s.Nodes[0]
	}

	if f := forget(1); !slices.Equal(f.Forgotten, []int{1}) || f.Current {
		t.Fatalf("forget version 1: %+v", f)
	}
	if m, err := stream.GetLastMsgForSubject(ctx, "mesh.secret."+salts[0]); err != nil || len(m.Data) != 0 || m.Header.Get("Mesh-Forgotten") == "" {
		t.Fatalf("the forgotten salt's subject holds %v %v, not the marker", m, err)
	}
	if commandstest.OnDisk(t, dir, salt) {
		t.Fatal("the forgotten salt is still on the bus's disk")
	}
	if s := state(); s.State == wire.StateCannotCompose {
		t.Fatalf("forgetting an old version broke the current one: %+v", s)
	}
	before, err := h.Core.Store.State(ctx)
	must(err)
	if f := forget(1); len(f.Forgotten) != 0 || !slices.Equal(f.Already, []int{1}) {
		t.Fatalf("forget version 1 again: %+v", f)
	}
	if after, _ := h.Core.Store.State(ctx); after.LastSeq != before.LastSeq {
		t.Fatal("forgetting what was forgotten wrote to the log")
	}
	// A second controller sharing the key has composed with the current
	// value (so it holds its key) when the first forgets it: it must not
	// go on composing a value the mesh forgot.
	other := t.TempDir()
	commandstest.WriteKey(t, home, other)
	nc2, err := srv.Connect()
	must(err)
	t.Cleanup(nc2.Close)
	second, err := commands.StartController(ctx, nc2, commands.ControllerConfig{Home: other})
	must(err)
	t.Cleanup(func() { second.Close() })
	stateOn := func(h *commands.Controller) wire.NodeStatus {
		t.Helper()
		s, err := h.Status.Status(ctx, wire.StatusRequest{})
		must(err)
		return s.Nodes[0]
	}
	if s := stateOn(second); s.State == wire.StateCannotCompose {
		t.Fatalf("the second controller cannot compose before anything was forgotten: %+v", s)
	}
	if f := forget(0); !slices.Equal(f.Forgotten, []int{2}) || !f.Current {
		t.Fatalf("forget every version: %+v", f)
	}
	if s := state(); s.State != wire.StateCannotCompose || !strings.Contains(s.Detail, "--set-file password=") {
		t.Fatalf("after its current value was forgotten: %+v", s)
	}
	// The second learns it by its watch of the secrets stream: a moment.
	embeddedtest.Eventually(t, "the second controller to stop composing the forgotten value", func() bool {
		return stateOn(second).State == wire.StateCannotCompose
	})
	if a, err := h.History.Audit(ctx, wire.AuditRequest{}); err != nil || !a.OK {
		t.Fatalf("audit after forgetting: %v %+v", err, a)
	}
	_, err = h.Nodes.Assign(ctx, wire.AssignRequest{CommandID: wire.NewCommandID(), Node: "db", Module: "postgres", Settings: map[string]string{"password": "third"}})
	must(err)
	if s := state(); s.State == wire.StateCannotCompose {
		t.Fatalf("set again after forgetting: %+v", s)
	}
	_, err = h.Credentials.ForgetSecret(ctx, wire.ForgetRequest{CommandID: wire.NewCommandID(), Node: "db", Module: "postgres", Setting: "port"})
	if err == nil || !strings.Contains(err.Error(), "no sealed value") {
		t.Fatalf("forgetting a setting that is no secret: %v", err)
	}
	if v, err := h.Status.VerifyProjections(ctx, wire.FoldRequest{}); err != nil || v.Diff != "" {
		t.Fatalf("a fresh fold differs from the live read models: %v\n%s", err, v.Diff)
	}
}
