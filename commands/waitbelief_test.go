package commands_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/meshctl/mesh/client"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// push --wait believes only what the fold believes (issue 29): a report
// "applied" on the exact digest, published on web-1's report subject by
// the controller's own bus user without web-1's MAC or its agent's
// signature, is set aside by the fold, and a wait that reads it (asking
// the controller over the bus, as the command line does, and in process)
// does not count it: it runs to its end and names it. Fails when the wait
// believes a report the fold set aside.
func TestAWaitBelievesOnlyWhatTheFoldBelieves(t *testing.T) {
	t.Parallel() // its own bus and homes; long and partly waiting: beside the others
	m := newTrustMesh(t, true)
	ctx := m.ctx
	_, err := m.h.Nodes.Enroll(ctx, wire.EnrollRequest{CommandID: wire.NewCommandID(), Name: "web-1"})
	m.must(err)
	pushed, err := m.h.Push.Push(ctx, wire.PushRequest{CommandID: wire.NewCommandID(), Node: "web-1"})
	m.must(err)
	s := pushed.Sent[0]

	forged := nats.NewMsg("mesh.rp.web-1.DeclarationApplied")
	forged.Data = envelope(t, events.NodeAggregate("web-1"), events.DeclarationApplied{Node: "web-1", Sequence: s.Sequence, Digest: s.Digest})
	js, err := jetstream.New(m.nc)
	m.must(err)
	if _, err := js.PublishMsg(ctx, forged); err != nil {
		t.Fatal(err)
	}

	op, err := nats.Connect(m.srv.ClientURL(), operatorOptions(t, m.home)...)
	m.must(err)
	defer op.Close()
	overTheBus := &client.Client{NC: op, Where: m.srv.ClientURL()}
	for what, judge := range map[string]client.Judge{"over the bus": overTheBus, "in process": m.h.Status} {
		err := client.WaitReport(ctx, m.h.Core.Store, judge, "web-1", s.Digest, s.StreamSeq, time.Second)
		if !errors.Is(err, client.ErrStillConverging) || !strings.Contains(err.Error(), "set aside as foreign") {
			t.Fatalf("a wait %s, over a forged report on the digest: %v", what, err)
		}
	}
	if n, _, _ := m.h.Core.Proj.Node("web-1"); n.LastReport != nil {
		t.Fatalf("the forged report is web-1's state: %+v", n.LastReport)
	}
}
