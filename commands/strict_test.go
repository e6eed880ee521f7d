package commands_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/meshctl/mesh/aggregates"
	"github.com/meshctl/mesh/compose"
	"github.com/meshctl/mesh/declaration"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/wire"
	"github.com/nats-io/nats.go"
)

// Strict inputs: a hand-written declaration naming a key twice is refused,
// nothing recorded; a build this controller cannot read (a newer one
// registered it) is named in the catalogue, which still lists the rest.
func TestStrictInputs(t *testing.T) {
	t.Parallel()
	m := newTrustMesh(t, false)
	ctx := m.ctx
	_, err := m.h.Nodes.Enroll(ctx, wire.EnrollRequest{CommandID: wire.NewCommandID(), Name: "web-1"})
	m.must(err)
	_, err = m.h.Push.Declare(ctx, wire.DeclareRequest{CommandID: wire.NewCommandID(), Node: "web-1", File: "f.json",
		Body: `{"resources":[{"kind":"file","path":"/a","path":"/b","mode":"0644","content":"x"}]}`})
	if !errors.Is(err, aggregates.ErrInvalid) || !strings.Contains(err.Error(), `names "path" twice`) {
		t.Fatalf("a declaration naming a key twice: %v", err)
	}
	for _, mode := range []string{"4755", "7777"} {
		_, err = m.h.Push.Declare(ctx, wire.DeclareRequest{CommandID: wire.NewCommandID(), Node: "web-1", File: "f.json",
			Body: `{"resources":[{"kind":"file","path":"/a","mode":"` + mode + `","content":"x"}]}`})
		if !errors.Is(err, aggregates.ErrInvalid) || !strings.Contains(err.Error(), "setuid, setgid or sticky") {
			t.Fatalf("a declaration of mode %s: %v", mode, err)
		}
	}
	if row, _, _ := m.h.Core.Proj.Node("web-1"); row.LastSent != nil {
		t.Fatalf("a refused declaration was recorded: %+v", row.LastSent)
	}

	// A newer controller's registration, its manifest with a field this one
	// does not know.
	newer := []byte(`{"module":"svc","requires":[],"provides":[],"consumes":[],"settings":{},"resources":[],"hooks":{"before":"/bin/svc"}}`)
	msg := nats.NewMsg(events.ModuleAggregate("svc").Subject("ModuleRegistered"))
	msg.Data = envelope(t, events.ModuleAggregate("svc"), events.ModuleRegistered{Module: "svc", Build: compose.Digest(newer), Manifest: newer})
	msg.Header.Set(events.MACHeader, declaration.MAC(m.h.Core.Keys.LogMAC(), msg.Subject, msg.Data))
	_, err = m.h.Core.Store.JetStream().PublishMsg(ctx, msg)
	m.must(err)
	m.fence()
	list, err := m.h.Modules.ListModules(ctx, wire.Empty{})
	if err != nil || len(list.Modules) != 1 || !strings.Contains(list.Modules[0].Unreadable, "cannot be read") {
		t.Fatalf("the catalogue with an unreadable build: %+v %v", list, err)
	}
}
