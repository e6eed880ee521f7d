package agent_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/wire"
)

// Issue 31, point 3: a seat's holder that also consumes the seat's own
// service (a builder node running a build client) cannot be composed
// without the seat, so the declaration that lets it go could never be
// sent. The handover is refused at once, in one sentence naming --force,
// with nothing recorded; one already under way (recorded by an older
// controller) waits saying so in seat show and status, which name --force
// as the way out; --force then completes it, and the old holder's client
// receives from the new holder. Fails when such a handover is accepted to
// wait for ever, or when status does not name the way out.
func TestASeatWhoseHolderConsumesItNeverDeadlocks(t *testing.T) {
	t.Parallel()
	m := newMesh(t)
	roots := map[string]string{}
	for _, n := range []string{"b-1", "b-2"} {
		m.Enroll(n)
		roots[n] = filepath.Join(t.TempDir(), "root")
		m.AgentAt(n, roots[n])
	}
	m.WriteModule(`{"module":"builder","claims":["builder"],"provides":["build"],"resources":[{"kind":"file","path":"/etc/builder.conf","mode":"0644","content":"i build\n"}]}`)
	m.WriteModule(`{"module":"client","consumes":["build"],"resources":[{"kind":"file","path":"/etc/client.conf","mode":"0644","template":"builder = {{.Receives.build.Node}}\n"}]}`)
	m.Assign("b-1", "builder", nil)
	m.Assign("b-1", "client", nil)
	for _, s := range m.Push("").Sent {
		m.Report(s.Node, s.Digest)
	}
	seat := func() wire.SeatView {
		s, err := m.H.Seats.ShowSeat(m.Ctx, wire.NameRequest{Name: "builder"})
		m.Must(err)
		return s
	}
	before := seat().Seat

	_, err := m.H.Seats.HandoverSeat(m.Ctx, wire.HandoverRequest{CommandID: wire.NewCommandID(), Seat: "builder", To: "b-2"})
	if err == nil || !strings.Contains(err.Error(), "b-1 cannot be composed without builder") || !strings.Contains(err.Error(), "--force") {
		t.Fatalf("a handover whose holder consumes the seat's service: %v", err)
	}
	if s := seat().Seat; s.Version != before.Version || s.HandoverTo != "" {
		t.Fatalf("a refused handover recorded something: %+v", s)
	}

	// One recorded before this refusal existed waits, and says the way out.
	_, err = m.H.Core.Store.Append(m.Ctx, events.SeatAggregate("builder"), before.Version, wire.NewCommandID(),
		events.SeatHandoverStarted{Seat: "builder", Module: "builder", From: "b-1", To: "b-2"})
	m.Must(err)
	way := "mesh seat handover builder --to b-2 --force"
	eventually(t, "seat show to name --force", func() bool {
		m.Must(m.H.Seats.DriveSeats(m.Ctx))
		return strings.Contains(seat().Waiting, "b-1 cannot be composed without builder") && strings.Contains(seat().Waiting, way)
	})
	s, err := m.H.Status.Status(m.Ctx, wire.StatusRequest{})
	m.Must(err)
	if !strings.Contains(strings.Join(s.Causes, "\n"), way) {
		t.Fatalf("status does not name --force while the handover waits on a holder that cannot be composed: %q", s.Causes)
	}

	// --force completes it: b-2 holds the seat, b-1's client receives from it.
	_, err = m.H.Seats.HandoverSeat(m.Ctx, wire.HandoverRequest{CommandID: wire.NewCommandID(), Seat: "builder", To: "b-2", Force: true})
	m.Must(err)
	read := func(n, path string) string { b, _ := os.ReadFile(filepath.Join(roots[n], path)); return string(b) }
	eventually(t, "b-2 to hold the seat and b-1's client to receive from it", func() bool {
		m.Must(m.H.Seats.DriveSeats(m.Ctx))
		s := seat().Seat
		return s.Node == "b-2" && s.HandoverTo == "" && read("b-2", "etc/builder.conf") == "i build\n" && read("b-1", "etc/client.conf") == "builder = b-2\n"
	})
	if read("b-1", "etc/builder.conf") != "" {
		t.Fatal("b-1 still holds builder's file after the forced handover")
	}
}
