package commands_test

import (
	"os"
	"strings"
	"testing"

	"github.com/meshctl/mesh/declaration"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/events/store"
	"github.com/meshctl/mesh/wire"
	"github.com/nats-io/nkeys"
)

// A standing is a fact only when a provider the reporting node runs says it
// of a consumer resolved to that provider (issue 29), decided at the
// standing's place in the log: a node's word about a provider not on it,
// or about a module that does not consume from it, is set aside as foreign
// and holds nothing; so is one sent before the provider was assigned, even
// once it is; a recovery of what is failing always clears it. The
// operator's report is refused the same. A fresh fold decides the same.
// Fails when the fold takes a standing on its signature alone.
func TestAStandingIsAProvidersOnItsMachineTowardItsConsumer(t *testing.T) {
	t.Parallel()
	m := newTrustMesh(t, true)
	ctx := m.ctx
	for _, n := range []string{"db-1", "app-1", "web-1"} {
		_, err := m.h.Nodes.Enroll(ctx, wire.EnrollRequest{CommandID: wire.NewCommandID(), Name: n, Capabilities: []string{"linux"}})
		m.must(err)
	}
	putArtifactOn(t, m.h, "mesh-greeter", []byte("the greeter's bytes: this test runs no agent")) // greeter.json installs it
	for _, f := range []string{"postgres.json", "app.json", "greeter.json"} {
		b, err := os.ReadFile("../examples/" + f)
		m.must(err)
		_, err = m.h.Modules.RegisterModule(ctx, wire.RegisterRequest{CommandID: wire.NewCommandID(), File: f, Manifest: string(b)})
		m.must(err)
	}
	assign := func(node, module string, settings map[string]string) {
		t.Helper()
		_, err := m.h.Nodes.Assign(ctx, wire.AssignRequest{CommandID: wire.NewCommandID(), Node: node, Module: module, Settings: settings})
		m.must(err)
	}
	assign("app-1", "app", nil)
	assign("web-1", "greeter", nil)

	// Each node says its word with its own join string: the signature and
	// MAC hold, so only the rule can set it aside.
	say := func(node string, ev events.Event) {
		t.Helper()
		bus, err := nkeys.FromSeed([]byte(m.join(node).Seed))
		m.must(err)
		mac, err := declaration.ReportMACKey(bus)
		m.must(err)
		signer, err := declaration.NewSigner(bus)
		m.must(err)
		st, err := store.AttachNode(m.connect(node, nil), "")
		m.must(err)
		_, err = st.Report(ctx, node, wire.NewCommandID(), ev, store.Sealing{Signer: signer, MAC: mac})
		m.must(err)
	}
	failing := func(provider, machine, consumer string) events.Event {
		return events.ProviderFailing{Provider: provider, Machine: machine, Consumer: consumer, Word: "down"}
	}
	// Before postgres is on db-1: foreign, and stays so once it is.
	say("db-1", failing("postgres", "db-1", "app"))
	assign("db-1", "postgres", map[string]string{"password": "x"})
	// A provider not on the machine that says it.
	say("web-1", failing("postgres", "web-1", "app"))
	// A consumer that consumes nothing from it.
	say("db-1", failing("postgres", "db-1", "greeter"))
	// A consumer not resolved to it: greeter on web-1 provides greeting,
	// which app does not consume.
	say("web-1", failing("greeter", "web-1", "app"))
	m.settle()
	standings := func() []wire.StandingView {
		s, err := m.h.Status.Status(ctx, wire.StatusRequest{})
		m.must(err)
		return s.Standings
	}
	if st := standings(); len(st) != 0 {
		t.Fatalf("standings of providers not on their machine or toward no consumer of theirs stand: %+v", st)
	}
	list, err := m.h.Access.ListForeign(ctx, wire.Empty{})
	m.must(err)
	for _, want := range []string{"which is not assigned there", "which is not assigned there", "toward greeter, which is not resolved to it", "toward app, which is not resolved to it"} {
		found := false
		for i, f := range list.Foreign {
			if strings.Contains(f.Reason, want) {
				list.Foreign = append(list.Foreign[:i], list.Foreign[i+1:]...)
				found = true
				break
			}
		}
		if !found {
			t.Errorf("no foreign standing saying %q in %+v", want, list.Foreign)
		}
	}

	// The rightful word is a fact.
	say("db-1", failing("postgres", "db-1", "app"))
	m.settle()
	if st := standings(); len(st) != 1 || st[0].Provider != "postgres" || st[0].Machine != "db-1" || st[0].Consumer != "app" {
		t.Fatalf("postgres on db-1 failing app: %+v", st)
	}
	// Moved away, its failing word is no more a fact, but its recovery
	// still clears what it said while it was there.
	_, err = m.h.Nodes.Unassign(ctx, wire.UnassignRequest{CommandID: wire.NewCommandID(), Node: "db-1", Module: "postgres"})
	m.must(err)
	say("db-1", events.ProviderFailing{Provider: "postgres", Machine: "db-1", Consumer: "app", Word: "after it left"})
	m.settle()
	if st := standings(); len(st) != 1 || st[0].Word != "down" {
		t.Fatalf("a standing of a provider that left its machine changed the word: %+v", st)
	}
	say("db-1", events.ProviderRecovered{Provider: "postgres", Machine: "db-1", Consumer: "app"})
	m.settle()
	if st := standings(); len(st) != 0 {
		t.Fatalf("the recovery of a provider that left did not clear its standing: %+v", st)
	}

	// The operator's word is held to the same, refused before it is appended.
	if _, err := m.h.Status.Report(ctx, wire.ReportRequest{CommandID: wire.NewCommandID(), Failing: true,
		Provider: "greeter", Machine: "web-1", Consumer: "app", Word: "x"}); err == nil || !strings.Contains(err.Error(), "not resolved to it") {
		t.Fatalf("the operator's standing toward a module that consumes nothing of it: %v", err)
	}

	// A fresh fold decides each the same, at its place in the log.
	v, err := m.h.Status.VerifyProjections(ctx, wire.FoldRequest{})
	if err != nil || v.Diff != "" {
		t.Fatalf("verify: %v\n%s", err, v.Diff)
	}
}
