package agent_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/meshctl/mesh/compose"
	"github.com/meshctl/mesh/projections"
	"github.com/meshctl/mesh/wire"
)

// Seats with real agents (issue 18, rule 24): a claiming module assigned
// to a second node is refused, naming the holder; a handover sends the
// holder its declaration without the module, and only after it applied
// that is the new holder sent the module and its consumer moved to it, in
// the log's order; with the holder's agent stopped the handover waits and
// says why; a controller stopped mid-handover leaves it to the next,
// which finishes it once the holder lets go; --force does not wait for a
// holder whose machine is lost. Fails when two holders could be recorded,
// or the new holder is sent the module before the old one let it go.
func TestASeatHasOneHolderAndHandsOverSafely(t *testing.T) {
	t.Parallel()
	m := newMesh(t)
	roots, stops := map[string]string{}, map[string]func(){}
	for _, n := range []string{"b-1", "b-2", "c-1"} {
		m.Enroll(n)
		roots[n] = filepath.Join(t.TempDir(), "root")
		stops[n] = m.AgentAt(n, roots[n])
	}
	m.WriteModule(`{"module":"builder","claims":["builder"],"provides":["build"],"resources":[{"kind":"file","path":"/etc/builder.conf","mode":"0644","content":"i build\n"}]}`)
	m.WriteModule(`{"module":"client","consumes":["build"],"resources":[{"kind":"file","path":"/etc/client.conf","mode":"0644","template":"builder = {{.Receives.build.Node}}\n"}]}`)
	m.Assign("b-1", "builder", nil)
	if _, err := m.H.Nodes.Assign(m.Ctx, wire.AssignRequest{CommandID: wire.NewCommandID(), Node: "b-2", Module: "builder"}); err == nil ||
		!strings.Contains(err.Error(), "builder on b-1 holds it") {
		t.Fatalf("a second holder: %v", err)
	}
	m.Assign("c-1", "client", nil)
	for _, s := range m.Push("").Sent {
		m.Report(s.Node, s.Digest)
	}
	has := func(n, path string) bool { _, err := os.Stat(filepath.Join(roots[n], path)); return err == nil }
	client := func() string { b, _ := os.ReadFile(filepath.Join(roots["c-1"], "etc/client.conf")); return string(b) }
	seat := func() projections.Seat {
		s, err := m.H.Seats.ShowSeat(m.Ctx, wire.NameRequest{Name: "builder"})
		m.Must(err)
		return s.Seat
	}
	handover := func(to string, force bool) {
		t.Helper()
		_, err := m.H.Seats.HandoverSeat(m.Ctx, wire.HandoverRequest{CommandID: wire.NewCommandID(), Seat: "builder", To: to, Force: force})
		m.Must(err)
	}

	// b-1 to b-2, both agents running.
	handover("b-2", false)
	eventually(t, "the seat on b-2, c-1 moved to it", func() bool {
		return seat().Node == "b-2" && seat().HandoverTo == "" && client() == "builder = b-2\n" && has("b-2", "etc/builder.conf")
	})
	if has("b-1", "etc/builder.conf") {
		t.Fatal("b-1 still holds builder's file after the handover")
	}
	// In the log's order: b-1 applied its declaration without builder
	// before b-2 was sent one with it. The history index is read as the
	// fold has it, which may be a moment behind the files the agents
	// wrote: both entries are waited for, then their order held.
	var released, taken uint64
	eventually(t, "b-1's release and b-2's send in the history", func() bool {
		released, taken = 0, 0
		h1, err := m.H.History.History(m.Ctx, wire.HistoryRequest{Node: "b-1"})
		m.Must(err)
		for i, e := range h1.Entries {
			if e.Kind == "declaration" && !slices.ContainsFunc(e.Builds, func(b compose.ModuleBuild) bool { return b.Module == "builder" }) {
				for _, r := range h1.Entries[i+1:] {
					if r.Kind == "applied" && r.Sequence == e.Sequence && released == 0 {
						released = r.Seq
					}
				}
			}
		}
		h2, err := m.H.History.History(m.Ctx, wire.HistoryRequest{Node: "b-2"})
		m.Must(err)
		for _, e := range h2.Entries {
			if e.Kind == "declaration" && taken == 0 && slices.ContainsFunc(e.Builds, func(b compose.ModuleBuild) bool { return b.Module == "builder" }) {
				taken = e.Seq
			}
		}
		return released != 0 && taken != 0
	})
	if released == 0 || taken <= released {
		t.Fatalf("b-2 was sent builder at event %d, b-1 let it go at event %d: two holders", taken, released)
	}

	// The holder's agent stopped: the handover waits, and says why.
	stops["b-2"]()
	handover("b-1", false)
	for range 3 {
		m.Must(m.H.Seats.DriveSeats(m.Ctx))
		if s := seat(); s.Node != "b-2" || s.HandoverTo != "b-1" {
			t.Fatalf("the handover did not wait for b-2: %+v", s)
		}
	}
	st, err := m.H.Status.Status(m.Ctx, wire.StatusRequest{})
	m.Must(err)
	if st.Well || !strings.Contains(strings.Join(st.Causes, "\n"), "b-2 has not reported applying its declaration without builder") {
		t.Fatalf("status during a waiting handover: %v", st.Causes)
	}
	// A controller stopped mid-handover: the next one takes it from there
	// once b-2's agent is back and lets the seat go.
	m.Must(m.Ctrl.Close())
	c2 := m.controller(20 * time.Millisecond)
	m.H = c2
	stops["b-2"] = m.AgentAt("b-2", roots["b-2"])
	eventually(t, "the handover to b-1 finished by the next controller", func() bool {
		return seat().Node == "b-1" && client() == "builder = b-1\n" && has("b-1", "etc/builder.conf") && !has("b-2", "etc/builder.conf")
	})

	// The holder's machine lost: --force does not wait for it.
	stops["b-1"]()
	handover("b-2", false)
	m.Must(m.H.Seats.DriveSeats(m.Ctx))
	if s := seat(); s.Node != "b-1" {
		t.Fatalf("the handover did not wait for b-1: %+v", s)
	}
	handover("b-2", true)
	eventually(t, "the forced handover to b-2", func() bool { return seat().Node == "b-2" && client() == "builder = b-2\n" })
	show, err := m.H.Seats.ShowSeat(m.Ctx, wire.NameRequest{Name: "builder"})
	m.Must(err)
	if last := show.Steps[len(show.Steps)-1]; !strings.Contains(last.What, "forced: b-1 was not waited for") {
		t.Fatalf("the seat's last step: %+v", last)
	}
	m.Verified()
}
