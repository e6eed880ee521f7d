package agent

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/meshctl/mesh/embedded/embeddedtest"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/events/store"
	"github.com/nats-io/nkeys"
)

// A report that cannot be published is kept in the agent's state, and sent
// by the next agent on that state once the bus is reachable.
func TestUnpublishedReportIsKeptAndSentLater(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := embeddedtest.Server(t)
	live := embeddedtest.Conn(t, srv)
	st, _, err := store.Open(ctx, live, store.StreamConfig{})
	if err != nil {
		t.Fatal(err)
	}
	kp, _ := nkeys.CreateAccount()
	pub, _ := kp.PublicKey()
	bus, _ := nkeys.CreateUser()
	seed, _ := bus.Seed()
	dir := t.TempDir()
	cfg := Config{Join: Join{Mesh: "m", Bus: srv.ClientURL(), Node: "web-1", Key: pub, Seed: string(seed)},
		Root: filepath.Join(dir, "root"), State: filepath.Join(dir, "state"), ReportTimeout: 200 * time.Millisecond, RetryEvery: 50 * time.Millisecond}

	lost := embeddedtest.Conn(t, srv)
	a, err := Open(ctx, lost, cfg)
	if err != nil {
		t.Fatal(err)
	}
	lost.Close() // the bus is gone for this agent
	a.mu.Lock()
	a.send(ctx, "rep.a.1.x.1", events.DeclarationApplied{Node: "web-1", Sequence: 1, Digest: "x"})
	a.mu.Unlock()
	a.Close()
	if kept, _ := loadState(cfg.State, "web-1"); len(kept.Pending) != 1 {
		t.Fatalf("the report was not kept: %+v", kept)
	}

	b, err := Open(ctx, embeddedtest.Conn(t, srv), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); b.Run(rctx) }()
	// Sent means acknowledged and no longer kept: a report stored but not
	// yet acknowledged stays kept and is sent again, stored once by its id.
	embeddedtest.Eventually(t, "the kept report to be sent", func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return len(b.state.Pending) == 0
	})
	cancel()
	<-done
	n := 0
	applied := events.ReportSubject("web-1", events.DeclarationApplied{}.EventType())
	if err := st.Read(ctx, store.ReadOptions{Filter: applied}, func(store.Msg) error { n++; return nil }); err != nil || n != 1 {
		t.Fatalf("%d applied reports in the stream (%v), want exactly the kept one", n, err)
	}
}

// However many resources fail and however long their reasons, a report
// stays within what a node may publish.
func TestAReportStaysWithinItsBound(t *testing.T) {
	t.Parallel()
	var failed []events.ResourceFailure
	for i := range 5000 {
		failed = append(failed, events.ResourceFailure{Path: fmt.Sprintf("/etc/%d/%s", i, strings.Repeat("\x01", 600)), Reason: strings.Repeat("é", 2000)})
	}
	ev := events.DeclarationFailed{Node: "web-1", Sequence: 1, Digest: strings.Repeat("d", 64), Failed: boundFailures(failed)}
	b, err := events.Encode(events.NodeAggregate("web-1"), "c", "", 0, time.Now(), ev)
	if err != nil {
		t.Fatal(err)
	}
	last := ev.Failed[len(ev.Failed)-1]
	if len(b) > events.MaxReport || len(ev.Failed) < 2 || !strings.Contains(last.Reason, fmt.Sprintf("and %d more", 5000-len(ev.Failed)+1)) {
		t.Fatalf("a report of 5,000 failures is %d bytes (at most %d), %d failures", len(b), events.MaxReport, len(ev.Failed))
	}
	if !utf8.ValidString(ev.Failed[0].Reason) {
		t.Fatal("a reason was cut inside a character")
	}
}
