package secrets_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/meshctl/mesh/commands"
	"github.com/meshctl/mesh/commands/commandstest"
	"github.com/meshctl/mesh/commands/secrets"
	"github.com/meshctl/mesh/embedded/embeddedtest"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/projections"
	"github.com/meshctl/mesh/secret"
	"github.com/meshctl/mesh/wire"
	"github.com/nats-io/nats.go/jetstream"
)

// Issue 29, side doors: anyone may aim a reply subject at a salt's subject
// (mesh.secret.<id>), and the bus's acknowledgement of a publish lands
// there. Taken for the salt, it made the setting unopenable (the node could
// not be composed), put the junk in a backup in place of the salt, and made
// a forget erase the junk and leave the salt on disk. Now the secrets
// stream takes one message a salt, and a stream made before is cleared of
// such junk at the start. Fails when the acknowledgement lands, or when a
// forget after it leaves the salt's bytes on the bus's disk.
func TestJunkAimedAtASaltChangesNothing(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	srv := embeddedtest.ServerIn(t, dir)
	home := t.TempDir()
	var ctrl *commands.Controller
	start := func() *commands.Controller {
		t.Helper()
		if ctrl != nil {
			ctrl.Close()
		}
		var err error
		if ctrl, err = commands.StartController(ctx, embeddedtest.Conn(t, srv), commands.ControllerConfig{Home: home}); err != nil {
			t.Fatal(err)
		}
		return ctrl
	}
	t.Cleanup(func() { ctrl.Close() })
	h := start()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	data, err := os.ReadFile("../../examples/postgres.json")
	must(err)
	_, err = h.Modules.RegisterModule(ctx, wire.RegisterRequest{CommandID: wire.NewCommandID(), File: "postgres.json", Manifest: string(data)})
	must(err)
	_, err = h.Nodes.Enroll(ctx, wire.EnrollRequest{CommandID: wire.NewCommandID(), Name: "db", Capabilities: []string{"linux"}})
	must(err)
	_, err = h.Nodes.Assign(ctx, wire.AssignRequest{CommandID: wire.NewCommandID(), Node: "db", Module: "postgres", Settings: map[string]string{"password": "door"}})
	must(err)
	var rows []projections.AssignmentRow
	must(h.Core.Proj.Read(func(v *projections.View) (err error) { rows, err = v.AssignmentsOf("db"); return err }))
	setting, err := secret.ParseSetting(rows[0].Settings["password"])
	must(err)
	subject := "mesh.secret." + setting.Key
	js := h.Core.Store.JetStream()
	stream, err := js.Stream(ctx, secrets.SecretsStream)
	must(err)
	salt, err := stream.GetLastMsgForSubject(ctx, subject)
	must(err)

	// The door: a report whose acknowledgement is aimed at the salt, then
	// one aimed at a subject no salt has (which the stream takes): once
	// that one is there, the first was taken or refused.
	controls := 0
	aim := func() {
		t.Helper()
		nc := embeddedtest.Conn(t, srv)
		controls++
		control := fmt.Sprintf("mesh.secret.control%d", controls)
		must(nc.PublishRequest(events.ReportSubject("db", "DeclarationApplied"), subject, []byte("{}")))
		must(nc.PublishRequest(events.ReportSubject("db", "DeclarationApplied"), control, []byte("{}")))
		embeddedtest.Eventually(t, "the acknowledgement aimed at "+control, func() bool {
			_, err := stream.GetLastMsgForSubject(ctx, control)
			return err == nil
		})
	}
	aim()
	if m, err := stream.GetLastMsgForSubject(ctx, subject); err != nil || m.Sequence != salt.Sequence {
		t.Fatalf("something landed on the salt's subject: %v %v", m, err)
	}
	s, err := h.Status.Status(ctx, wire.StatusRequest{})
	must(err)
	if s.Nodes[0].State == wire.StateCannotCompose {
		t.Fatalf("junk at its salt broke db's secret: %+v", s.Nodes[0])
	}

	// A secrets stream made before the limit, holding such junk, is
	// cleared of it when the controller starts.
	info, err := stream.Info(ctx)
	must(err)
	old := info.Config
	old.MaxMsgsPerSubject, old.Discard, old.DiscardNewPerSubject = -1, jetstream.DiscardOld, false
	_, err = js.UpdateStream(ctx, old)
	must(err)
	aim()
	if m, err := stream.GetLastMsgForSubject(ctx, subject); err != nil || m.Sequence == salt.Sequence {
		t.Fatalf("the junk did not land on a stream without the limit (the test proves nothing): %v %v", m, err)
	}
	h = start()
	if m, err := stream.GetLastMsgForSubject(ctx, subject); err != nil || m.Sequence != salt.Sequence {
		t.Fatalf("the start left junk on the salt's subject: %v %v", m, err)
	}
	salts, err := secrets.ExportSalts(ctx, js)
	must(err)
	if string(salts[setting.Key]) != string(salt.Data) {
		t.Fatal("a backup does not carry the salt")
	}
	_, err = h.Credentials.ForgetSecret(ctx, wire.ForgetRequest{CommandID: wire.NewCommandID(), Node: "db", Module: "postgres", Setting: "password"})
	must(err)
	if commandstest.OnDisk(t, dir, salt.Data) {
		t.Fatal("after the forget the salt is still on the bus's disk")
	}
	s, err = h.Status.Status(ctx, wire.StatusRequest{})
	must(err)
	if !strings.Contains(s.Nodes[0].Detail, "--set-file password=") {
		t.Fatalf("after the forget: %+v", s.Nodes[0])
	}
}
