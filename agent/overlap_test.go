package agent_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshctl/mesh/agent/agenttest"
	"github.com/meshctl/mesh/commands"
	"github.com/meshctl/mesh/embedded/embeddedtest"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/projections"
	"github.com/meshctl/mesh/wire"
)

// users reads the users db-1's provider accepts, a line "user password"
// each, as its rendered file lists them.
func users(t *testing.T, dbRoot string) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dbRoot, "etc/postgres/users.conf"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(l, "app_app_1 ") {
			out = append(out, strings.TrimPrefix(l, "app_app_1 "))
		}
	}
	return out
}

// stage is status's stage of postgres's rotation for app.
func (m *mesh) stage(h *commands.Controller) wire.RotationStage {
	m.T.Helper()
	s, err := h.Status.Status(m.Ctx, wire.StatusRequest{})
	m.Must(err)
	for _, r := range s.Rotations {
		if r.Provider == "postgres" && r.Consumer == "app" {
			return r
		}
	}
	m.T.Fatalf("status names no rotation of postgres for app: %+v", s.Rotations)
	return wire.RotationStage{}
}

// completed waits for h's status to say the rotation of postgres for app
// completed, and answers it.
func (m *mesh) completed(h *commands.Controller) wire.RotationStage {
	m.T.Helper()
	var s wire.RotationStage
	embeddedtest.Eventually(m.T, "status to say the rotation completed", func() bool {
		s = m.stage(h)
		return s.Stage == wire.RotationCompleted
	})
	return s
}

// rotatedAway sets up db-1 and app-1 applying postgres and app, stops
// app-1's agent, rotates with overlap, and waits for db-1 to apply the
// rotation: the consumer end away, the provider at the new generation.
// It answers the roots, the password app-1 still holds and the reply.
func (m *mesh) rotatedAway(overlap time.Duration) (dbRoot, appRoot, old string, r wire.RotateReply) {
	m.T.Helper()
	dbRoot, appRoot, stopApp := m.dbAndApp()
	m.Assign("db-1", "postgres", map[string]string{"password": "pw"})
	m.Assign("app-1", "app", nil)
	for _, s := range m.Push("").Sent {
		m.Report(s.Node, s.Digest)
	}
	old = minted(m.T, appRoot)
	stopApp()
	r, err := m.H.Credentials.Rotate(m.Ctx, wire.RotateRequest{CommandID: wire.NewCommandID(), Provider: "postgres", Consumer: "app", Overlap: overlap})
	m.Must(err)
	for _, s := range r.Sent {
		if s.Node == "db-1" {
			m.Report(s.Node, s.Digest)
		}
	}
	return dbRoot, appRoot, old, r
}

// Rule 7 with an overlap, on real agents: app-1's machine is away during
// the rotation, so it keeps the old password, and db-1's rendered file
// lists it beside the new one (app-1 still gets in); status says overlap,
// waiting on app-1. Once app-1 returns and applies, the controller by
// itself records the completion and sends db-1 a file with the new
// password only. Fails when the provider drops the old at the rotation
// (the lock-out this fixes), when the old is never dropped, or when the
// drop needs an operator's command.
func TestRotationOverlapLetsAnAwayConsumerInUntilItApplies(t *testing.T) {
	t.Parallel()
	m := &mesh{agenttest.NewWith(t, func(c *commands.ControllerConfig) { c.RolloutEvery = 20 * time.Millisecond })}
	dbRoot, appRoot, old, r := m.rotatedAway(0)
	if r.OverlapUntil.IsZero() {
		t.Fatalf("rotate with the default overlap answers no bound: %+v", r)
	}
	if got := users(t, dbRoot); !slices.Contains(got, old) || len(got) != 2 {
		t.Fatalf("during the overlap db-1 lists %q for app-1, which holds %q: want it and the new", got, old)
	}
	if s := m.stage(m.H); s.Stage != wire.RotationOverlap || !slices.Equal(s.Waiting, []string{"app-1"}) || !s.Until.Equal(r.OverlapUntil) {
		t.Fatalf("status during the overlap: %+v", s)
	}

	m.AgentAt("app-1", appRoot)
	embeddedtest.Eventually(t, "db-1 to list app-1's new password only", func() bool {
		got := users(t, dbRoot)
		return len(got) == 1 && got[0] != old
	})
	now := minted(t, appRoot)
	if got := users(t, dbRoot); now == old || got[0] != now {
		t.Fatalf("after the overlap app-1 holds %q (had %q), db-1 lists %q", now, old, got)
	}
	// Status reads the read models, which may fold the completion a
	// moment after db-1 applied the file it caused (CI read the overlap
	// still open once), so it is polled, as the bound's test does.
	if s := m.completed(m.H); s.Reason != string(events.CompletedApplied) || s.CompletedAt.IsZero() {
		t.Fatalf("status after app-1 applied: %+v", s)
	}
	// The drop was the controller's, recorded as its own send.
	row, _, err := m.H.Core.Proj.Node("db-1")
	m.Must(err)
	if row.LastSent == nil || row.LastSent.By != "rotation completed" {
		t.Fatalf("db-1's last send: %+v", row.LastSent)
	}
	m.Verified()
}

// The bound passing ends the overlap though the consumer never applied:
// the controller's clock is moved past it, and db-1 is sent the new
// password only, app-1 (still away) being refused from then on. Fails
// when the bound is not read, or read from another clock than the
// controller's.
func TestRotationOverlapEndsWhenItsBoundPasses(t *testing.T) {
	t.Parallel()
	var ahead atomic.Int64
	m := &mesh{agenttest.NewWith(t, func(c *commands.ControllerConfig) {
		c.RolloutEvery = 20 * time.Millisecond
		c.Now = func() time.Time { return time.Now().Add(time.Duration(ahead.Load())) }
	})}
	dbRoot, _, old, _ := m.rotatedAway(time.Hour)
	if got := users(t, dbRoot); !slices.Contains(got, old) || len(got) != 2 {
		t.Fatalf("during the overlap db-1 lists %q: want %q and the new", got, old)
	}
	if s := m.stage(m.H); s.Stage != wire.RotationOverlap {
		t.Fatalf("before the bound: %+v", s)
	}
	ahead.Store(int64(time.Hour + time.Minute))
	embeddedtest.Eventually(t, "db-1 to drop the old password", func() bool {
		got := users(t, dbRoot)
		return len(got) == 1 && got[0] != old
	})
	// The completion is in the log before db-1 is sent its password, but
	// status reads the read models, which may fold it a moment after
	// db-1 applied (a loaded box read the overlap still open).
	if s := m.completed(m.H); s.Reason != string(events.CompletedBoundPassed) {
		t.Fatalf("after the bound: %+v", s)
	}
	m.Verified()
}

// A controller restarted mid-overlap finishes it from its read models,
// folded from the log: the first never drives (RolloutEvery -1), so
// app-1's apply leaves the overlap open; it is closed, started again on
// its own home, driving, and completes it. A second controller folding
// the stream afresh in a home of its own agrees. Fails when the overlap's
// state lives anywhere but the log.
func TestRotationOverlapIsFinishedByAControllerRestartedMidway(t *testing.T) {
	t.Parallel()
	m := &mesh{agenttest.NewWith(t, func(c *commands.ControllerConfig) { c.RolloutEvery = -1 })}
	dbRoot, appRoot, old, r := m.rotatedAway(0)
	m.AgentAt("app-1", appRoot)
	for _, s := range r.Sent {
		if s.Node == "app-1" {
			m.Report(s.Node, s.Digest)
		}
	}
	if s := m.stage(m.H); s.Stage != wire.RotationOverlap || len(s.Waiting) != 0 {
		t.Fatalf("app-1 applied, nothing drives: %+v", s)
	}
	if got := users(t, dbRoot); !slices.Contains(got, old) {
		t.Fatalf("nothing drove, yet db-1 dropped the old: %q", got)
	}
	m.Must(m.Ctrl.Close())
	again, err := commands.StartController(m.Ctx, embeddedtest.Conn(t, m.Srv), commands.ControllerConfig{Home: m.Home, RolloutEvery: 20 * time.Millisecond})
	m.Must(err)
	t.Cleanup(func() { again.Close() })
	m.Ctrl, m.H = again, again
	embeddedtest.Eventually(t, "the restarted controller to drop the old password", func() bool {
		got := users(t, dbRoot)
		return len(got) == 1 && got[0] != old
	})
	if s := m.completed(m.H); s.Reason != string(events.CompletedApplied) {
		t.Fatalf("the restarted controller's status: %+v", s)
	}
	fresh := m.controller(-1)
	embeddedtest.Eventually(t, "a controller folding afresh to hold the completion", func() bool {
		var done bool
		m.Must(fresh.Proj.Read(func(v *projections.View) error {
			r, _, err := v.Rotation("postgres", "app")
			done = r.Completed != nil && r.Completed.Reason == events.CompletedApplied
			return err
		}))
		return done
	})
	m.Verified()
}
