package reconcile_test

import (
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshctl/mesh/agent"
	"github.com/meshctl/mesh/agent/agenttest"
	"github.com/meshctl/mesh/commands"
	"github.com/meshctl/mesh/commands/liveness"
	"github.com/meshctl/mesh/commands/reconcile"
	"github.com/meshctl/mesh/embedded/embeddedtest"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/projections"
	"github.com/meshctl/mesh/wire"
)

// clock is the controller's clock: real time plus an offset the test
// moves, so the liveness bound is passed without waiting it out.
type clock struct{ ahead atomic.Int64 }

func (c *clock) Now() time.Time { return time.Now().Add(time.Duration(c.ahead.Load())) }

func beatFast(cfg *agent.Config) { cfg.LiveEvery = 20 * time.Millisecond }

// A node unreachable when its composition changed is left until it is
// heard again (a send it cannot read spends the rate on nothing), and its
// return is what has the reconciler send it.
func TestAReturningNodeIsSentWhatChangedWhileAway(t *testing.T) {
	var c clock
	m := agenttest.NewWith(t, func(cfg *commands.ControllerConfig) {
		cfg.Now, cfg.RolloutEvery = c.Now, -1
		cfg.Reconcile = reconcile.Config{Rate: 10, Every: -1}
	})
	m.Enroll("web-1", "linux")
	root := filepath.Join(t.TempDir(), "root")
	stop := m.AgentWith("web-1", root, beatFast)
	m.WriteModule(motd("motd", ""))
	m.Assign("web-1", "motd", nil)
	tick(m)
	m.WaitState("web-1", wire.StateCurrent)
	embeddedtest.Eventually(t, "the controller to hear web-1", func() bool { return !m.H.Live.LastHeard("web-1").IsZero() })

	stop()
	c.ahead.Add(int64(liveness.DefaultUnreachableAfter + 2*time.Second))
	m.WaitState("web-1", wire.StateUnreachable)
	m.Assign("web-1", "motd", map[string]string{"text": "back"})
	tick(m)
	if by := declarations(m, "web-1"); len(by) != 1 {
		t.Fatalf("web-1 was sent %v while unreachable; want nothing more", by)
	}
	s, err := m.H.Status.Status(m.Ctx, wire.StatusRequest{})
	m.Must(err)
	if len(s.Reconciler.Left) != 1 || !strings.Contains(s.Reconciler.Left[0].Reason, "unreachable") {
		t.Fatalf("status says the reconciler left %+v; want web-1, unreachable", s.Reconciler.Left)
	}

	m.AgentWith("web-1", root, beatFast)
	embeddedtest.Eventually(t, "web-1's return to be recorded", func() bool {
		l, err := projections.Liveness{}, error(nil)
		m.Must(m.H.Core.Proj.Read(func(v *projections.View) error { l, err = v.NodeLiveness("web-1"); return err }))
		return l.Version > 0 && !l.Unreachable
	})
	tick(m)
	fileIs(m, filepath.Join(root, "etc/motd"), "back\n")
	if by := declarations(m, "web-1"); len(by) != 2 || by[1] != events.ByReconciler {
		t.Fatalf("web-1 was sent %v on its return; want a second declaration by the reconciler", by)
	}
}
