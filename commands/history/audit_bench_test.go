package history

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/meshctl/mesh/commands/core/coretest"
	"github.com/meshctl/mesh/declaration"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/wire"
)

// BenchmarkAudit audits the whole mesh over a stream of about
// MESH_BENCH_EVENTS events (default 100,000) of real traffic: for each of a
// thousand nodes its enrolment and report key, then rounds of a signed
// declaration (about 1.4 KB) and the agent's signed report. It states the
// audit's rate in events/s beside the bare ed25519 checks this machine does
// a second in the same run: an audit checks a signature for most events, so
// the second bounds the first.
func BenchmarkAudit(b *testing.B) {
	ctx := context.Background()
	total := coretest.Events(100_000)
	bm := coretest.New(b, false)
	signer, _ := declaration.NewSigner(bm.Key)
	agent, report := bm.Agent, bm.Report
	// The controller's key record first, as a controller's start writes it.
	if _, err := bm.Store.Append(ctx, events.ControllerAggregate(), 0, "key", events.ControllerKeyRecorded{PublicKey: signer.PublicKey()}); err != nil {
		b.Fatal(err)
	}
	const nodes = 1000
	content := strings.Repeat("some configuration line of a module's file\n", 20)
	previous := map[string]string{}
	for i := range nodes {
		name := fmt.Sprintf("node-%d", i)
		bm.Publish(events.NodeAggregate(name), events.NodeEnrolled{Name: name})
		report(name, events.ReportKeyRecorded{Node: name, Key: agent.PublicKey()})
	}
	for r := range max(1, (total-2*nodes)/(2*nodes)) {
		for i := range nodes {
			name := fmt.Sprintf("node-%d", i)
			previous[name] = bm.Send(signer, name, uint64(r+1), previous[name], content)
			report(name, events.DeclarationApplied{Node: name, Sequence: uint64(r + 1), Digest: previous[name]})
		}
	}
	h := New(bm.Fold())
	var a wire.AuditReport
	b.ResetTimer()
	for range b.N {
		var err error
		if a, err = h.Audit(ctx, wire.AuditRequest{}); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if !a.OK || a.Events < uint64(total)*9/10 {
		b.Fatalf("the audit of a sound log of %d events: ok %v, %d events read", total, a.OK, a.Events)
	}
	b.ReportMetric(a.Rate, "events/s")
	b.ReportMetric(a.SignatureRate, "bare-ed25519/s")
	b.ReportMetric(a.Rate/a.SignatureRate, "audit/ed25519")
}
