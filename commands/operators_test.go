package commands_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/meshctl/mesh/aggregates"
	"github.com/meshctl/mesh/busauth"
	"github.com/meshctl/mesh/client"
	"github.com/meshctl/mesh/embedded/embeddedtest"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/projections"
	"github.com/meshctl/mesh/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"github.com/nats-io/nkeys"
)

// anOperator is one operator added to m with role: its key, and its
// connection with the violations the bus sent it.
type anOperator struct {
	name string
	kp   nkeys.KeyPair
	pub  string
	nc   *nats.Conn
	v    *violations
}

func (m *closedMesh) addOperator(name string, role events.Role) anOperator {
	m.t.Helper()
	kp, _ := nkeys.CreateUser()
	pub, _ := kp.PublicKey()
	ctx := events.WithBy(context.Background(), events.AdminName)
	if _, err := m.h.Operators.Add(ctx, wire.OperatorAddRequest{CommandID: wire.NewCommandID(), Name: name, Role: role, Key: pub}); err != nil {
		m.t.Fatal(err)
	}
	o := anOperator{name: name, kp: kp, pub: pub, v: &violations{}}
	nc, err := nats.Connect(m.srv.ClientURL(), append(busauth.KeyOptions(kp), nats.ErrorHandler(o.v.handler))...)
	if err != nil {
		m.t.Fatalf("%s connecting: %v", name, err)
	}
	m.t.Cleanup(nc.Close)
	o.nc = nc
	return o
}

// answerCode is the code the controller answered a request with ("" for
// an answer that is no error).
func answerCode(t *testing.T, nc *nats.Conn, subject string) string {
	t.Helper()
	msg, err := nc.Request(subject, []byte("not json"), 10*time.Second)
	if err != nil {
		t.Fatalf("%s: no answer: %v", subject, err)
	}
	return msg.Header.Get(micro.ErrorCodeHeader)
}

// Issue 33: every role against every verb, on a real closed bus, cell by
// cell, twice. The bus lets an operator publish only the verbs its role
// allows, under its own key; the controller refuses any other, whatever
// the bus let through. A cell the role allows reaches the controller and
// is judged on its content (here "not json": 400); one it does not is a
// permissions violation at the bus, and 403 at the controller.
func TestEveryRoleAgainstEveryVerb(t *testing.T) {
	t.Parallel() // its own bus and home: beside the others
	m := newClosedMesh(t, 0)
	ops := map[events.Role]anOperator{
		events.RoleViewer:   m.addOperator("vera", events.RoleViewer),
		events.RoleDeployer: m.addOperator("dan", events.RoleDeployer),
		events.RoleAdmin:    m.addOperator("ada", events.RoleAdmin),
	}
	// The controller's own connection may publish anything: through it,
	// the controller's check alone decides each cell.
	ctrl := m.h.Core.Store.NC()
	for _, role := range events.Roles {
		o := ops[role]
		for _, verb := range wire.Verbs {
			allowed := role.Allows(wire.Needs(verb))
			subject := wire.CallerSubject(o.pub, verb)
			want := wire.CodeForbidden
			if allowed {
				want = wire.CodeBadRequest
			}
			if got := answerCode(t, ctrl, subject); got != want {
				t.Errorf("the controller answered %s calling %s with %q, want %q", role, verb, got, want)
			}
			if allowed {
				if got := answerCode(t, o.nc, subject); got != wire.CodeBadRequest {
					t.Errorf("%s calling %s over the bus: %q, want it judged (400)", role, verb, got)
				}
				continue
			}
			if err := o.nc.Publish(subject, []byte("not json")); err != nil {
				t.Fatal(err)
			}
			o.v.waitFor(t, fmt.Sprintf("Publish to %q", subject))
		}
	}
	// A call under no key, or a key no operator has, is refused by the
	// controller on a closed bus.
	stranger, _ := nkeys.CreateUser()
	strangerPub, _ := stranger.PublicKey()
	for _, caller := range []string{wire.OpenCaller, strangerPub} {
		if got := answerCode(t, ctrl, wire.CallerSubject(caller, wire.SubjectStatus)); got != wire.CodeForbidden {
			t.Errorf("status called as %s: %q, want 403", caller, got)
		}
	}
	// A refusal names the role that would allow it, through the client
	// too, and is the bus's refusal heard: waited out, it would be an
	// unanswered question (ErrNoAnswer) at the client's timeout instead.
	d := client.NewDenials()
	vnc, err := nats.Connect(m.srv.ClientURL(), append(busauth.KeyOptions(ops[events.RoleViewer].kp), d.Option())...)
	if err != nil {
		t.Fatal(err)
	}
	defer vnc.Close()
	cl := client.Client{NC: vnc, Denials: d, Timeout: time.Minute}
	err = cl.Call(context.Background(), wire.SubjectNodeAssign, wire.AssignRequest{Node: "x", Module: "y"}, &wire.Changed{})
	if !errors.Is(err, aggregates.ErrForbidden) || !strings.Contains(err.Error(), "deployer role") {
		t.Fatalf("a viewer's assign: %v", err)
	}
	// A viewer asking a node for its logs is refused by the bus too, and
	// heard at once, not waited out as a silent node.
	_, err = cl.Logs(context.Background(), "web-1", wire.LogsRequest{})
	if !errors.Is(err, aggregates.ErrForbidden) || !strings.Contains(err.Error(), "deployer role") {
		t.Fatalf("a viewer's logs: %v", err)
	}
}

// Issue 33, attacked: a viewer's key, used on the bus directly, cannot
// write what only the controller (or an admin's verb) may, cannot call as
// another operator, cannot hear another's answers nor read the secrets'
// salts; a deployer's send is recorded as the deployer's; and a removed
// operator's connection ends at once, and its key is refused after.
func TestOperatorsOnTheBusAsAnAttackerWouldUseThem(t *testing.T) {
	t.Parallel() // its own bus and home: beside the others
	m := newClosedMesh(t, 0)
	ctx := context.Background()
	m.enrollAndDeclare("app-1")
	viewer := m.addOperator("vera", events.RoleViewer)
	deployer := m.addOperator("dan", events.RoleDeployer)
	admin, found := operatorRow(t, m, events.AdminName)
	if !found || admin.Role != events.RoleAdmin || admin.AddedBy != events.ActorController {
		t.Fatalf("the first admin, made by the controller at start: %+v", admin)
	}

	for _, subject := range []string{
		events.OperatorAggregate("vera").Subject("OperatorAdded"),  // making itself an admin in the log
		events.OperatorAggregate("dan").Subject("OperatorRemoved"), // removing another
		wire.CallerSubject(admin.Key, wire.SubjectOperatorAdd),     // calling as the admin
		wire.CallerSubject(deployer.pub, wire.SubjectPush),         // calling as the deployer
		wire.CallerSubject(viewer.pub, wire.SubjectOperatorAdd),    // calling an admin's verb as itself
		"$JS.API.STREAM.INFO." + events.SecretsStream,              // the secrets' salts
		"$JS.API.DIRECT.GET." + events.SecretsStream,               //
		"$JS.API.STREAM.PURGE." + events.Stream,                    // the log itself
		events.LogsSubject("app-1"),                                // a node's programs' logs: a deployer's
		"mesh.api.node.retire",                                     // a verb's bare subject, under no key
		"$KV.state.x",                                              // a module's state
		events.StoredSubject("app-1"),                              // a declaration as if the stream had stored it
	} {
		if err := viewer.nc.Publish(subject, []byte("{}")); err != nil {
			t.Fatal(err)
		}
		viewer.v.waitFor(t, fmt.Sprintf("Publish to %q", subject))
	}
	// Not even an admin tells a node what the stream stored: an old
	// declaration, signed, put there would be applied as the newest.
	ada := m.addOperator("ada", events.RoleAdmin)
	if err := ada.nc.Publish(events.StoredSubject("app-1"), []byte("{}")); err != nil {
		t.Fatal(err)
	}
	ada.v.waitFor(t, fmt.Sprintf("Publish to %q", events.StoredSubject("app-1")))
	if _, err := m.h.Operators.Remove(events.WithBy(ctx, events.AdminName), wire.NameRequest{Name: "ada"}); err != nil {
		t.Fatal(err) // the one admin again, as the rest of the test has it
	}
	for _, subject := range []string{"_INBOX.>", wire.OperatorInbox(admin.Key) + ".>", "mesh.op.>", "mesh.logs.>", "mesh.secret.>"} {
		if _, err := viewer.nc.Subscribe(subject, func(*nats.Msg) {}); err == nil {
			viewer.v.waitFor(t, fmt.Sprintf("Subscription to %q", subject))
		}
	}
	// Its own reads work: status, and the log's events.
	var s wire.StatusReport
	if err := (&client.Client{NC: viewer.nc}).Call(ctx, wire.SubjectStatus, wire.StatusRequest{}, &s); err != nil || len(s.Nodes) != 1 {
		t.Fatalf("the viewer's status: %+v %v", s, err)
	}

	// The deployer's send: the log and history say it asked.
	if err := (&client.Client{NC: deployer.nc}).Call(ctx, wire.SubjectDeclare, wire.DeclareRequest{CommandID: wire.NewCommandID(), Node: "app-1",
		File: "f.json", Body: `{"resources":[]}`}, &wire.PushedNode{}); err != nil {
		t.Fatalf("the deployer's declare: %v", err)
	}
	var h wire.History
	if err := (&client.Client{NC: viewer.nc}).Call(ctx, wire.SubjectHistory, wire.HistoryRequest{Node: "app-1"}, &h); err != nil || len(h.Entries) != 2 {
		t.Fatalf("app-1's history: %+v %v", h, err)
	}
	if first, last := h.Entries[0], h.Entries[1]; first.Operator != "" || last.Operator != "dan" || last.By != events.ByHand {
		t.Fatalf("who asked for app-1's declarations: %q then %q (by %q)", first.Operator, last.Operator, last.By)
	}
	msg, err := m.h.Core.Store.Get(ctx, h.Entries[1].Seq)
	if err != nil {
		t.Fatal(err)
	}
	if env, _, err := events.Decode(msg.Data); err != nil || env.By != "dan" {
		t.Fatalf("the send's envelope names %q (%v)", env.By, err)
	}

	// Removed, the deployer's live connection ends, and its key is refused.
	removed, err := m.h.Operators.Remove(events.WithBy(ctx, events.AdminName), wire.NameRequest{Name: "dan"})
	if err != nil || !removed.Changed || removed.Operator.RemovedBy != events.AdminName {
		t.Fatalf("removing dan: %+v %v", removed, err)
	}
	embeddedtest.Eventually(t, "the removed deployer's connection to end", func() bool { return !deployer.nc.IsConnected() })
	if _, err := nats.Connect(m.srv.ClientURL(), busauth.KeyOptions(deployer.kp)...); err == nil {
		t.Fatal("a removed operator's key connected again")
	}
	// Removing again is nothing to do; the last admin is not removed, nor
	// does an operator remove itself.
	if again, err := m.h.Operators.Remove(events.WithBy(ctx, events.AdminName), wire.NameRequest{Name: "dan"}); err != nil || again.Changed {
		t.Fatalf("removing dan again: %+v %v", again, err)
	}
	if _, err := m.h.Operators.Remove(events.WithBy(ctx, "vera"), wire.NameRequest{Name: events.AdminName}); !errors.Is(err, aggregates.ErrInvalid) || !strings.Contains(err.Error(), "last admin") {
		t.Fatalf("removing the last admin: %v", err)
	}
	if _, err := m.h.Operators.Remove(events.WithBy(ctx, events.AdminName), wire.NameRequest{Name: events.AdminName}); !errors.Is(err, aggregates.ErrInvalid) {
		t.Fatalf("an admin removing itself: %v", err)
	}
	// A name the controller acts under is no operator's to take.
	kp, _ := nkeys.CreateUser()
	pub, _ := kp.PublicKey()
	for _, name := range []string{events.ActorReconciler, events.ActorController} {
		if _, err := m.h.Operators.Add(ctx, wire.OperatorAddRequest{CommandID: wire.NewCommandID(), Name: name, Role: events.RoleViewer, Key: pub}); !errors.Is(err, aggregates.ErrInvalid) {
			t.Fatalf("adding an operator named %s: %v", name, err)
		}
	}
}

func operatorRow(t *testing.T, m *closedMesh, name string) (projections.Operator, bool) {
	t.Helper()
	var o projections.Operator
	var found bool
	if err := m.h.Proj.Read(func(v *projections.View) (err error) { o, found, err = v.Operator(name); return err }); err != nil {
		t.Fatal(err)
	}
	return o, found
}

// Issue 33, point 4: a secret setting is the admin's to set. A deployer
// assigns and sets plain settings, and is refused a secret one (alone or
// in a batch) in one sentence naming the role that may, with nothing
// recorded; the admin sets it.
func TestASecretSettingIsTheAdminsToSet(t *testing.T) {
	t.Parallel() // its own bus and home: beside the others
	m := newClosedMesh(t, 0)
	ctx := context.Background()
	m.enrollAndDeclare("db-1")
	deployer := m.addOperator("dan", events.RoleDeployer)
	dan := &client.Client{NC: deployer.nc}
	mod := `{"module":"db","settings":{"port":{"default":"5432"},"password":{"required":true,"secret":true}},
	  "resources":[{"kind":"file","path":"/etc/db.conf","mode":"0600","content":"x\n"}]}`
	if err := dan.Call(ctx, wire.SubjectModuleRegister, wire.RegisterRequest{CommandID: wire.NewCommandID(), File: "db.json", Manifest: mod}, &wire.Registered{}); err != nil {
		t.Fatalf("the deployer registers db: %v", err)
	}
	before, err := m.h.Core.Store.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	err = dan.Call(ctx, wire.SubjectNodeAssign, wire.AssignRequest{CommandID: wire.NewCommandID(), Node: "db-1", Module: "db",
		Settings: map[string]string{"port": "6000", "password": "hunter2"}}, &wire.Assigned{})
	if !errors.Is(err, aggregates.ErrForbidden) || !strings.Contains(err.Error(), "password") || !strings.Contains(err.Error(), "needs the admin role") {
		t.Fatalf("the deployer setting a secret: %v", err)
	}
	err = dan.Call(ctx, wire.SubjectNodeAssignBatch, wire.AssignBatchRequest{CommandID: wire.NewCommandID(), Nodes: []string{"db-1"}, Module: "db",
		Settings: map[string]string{"password": "hunter2"}}, &wire.BatchReply{})
	if !errors.Is(err, aggregates.ErrForbidden) {
		t.Fatalf("the deployer setting a secret in a batch: %v", err)
	}
	if after, err := m.h.Core.Store.State(ctx); err != nil || after.LastSeq != before.LastSeq {
		t.Fatalf("refused assignments appended events %d to %d (%v)", before.LastSeq, after.LastSeq, err)
	}
	// The admin sets it; the deployer then changes a plain setting.
	admin := events.WithBy(ctx, events.AdminName)
	if _, err := m.h.Nodes.Assign(admin, wire.AssignRequest{CommandID: wire.NewCommandID(), Node: "db-1", Module: "db",
		Settings: map[string]string{"password": "hunter2"}}); err != nil {
		t.Fatalf("the admin setting a secret: %v", err)
	}
	if err := dan.Call(ctx, wire.SubjectNodeAssign, wire.AssignRequest{CommandID: wire.NewCommandID(), Node: "db-1", Module: "db",
		Settings: map[string]string{"port": "6000"}}, &wire.Assigned{}); err != nil {
		t.Fatalf("the deployer setting a plain setting: %v", err)
	}
}
