package agent_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meshctl/mesh/projections"
	"github.com/meshctl/mesh/wire"
)

// healthSvc is svc's manifest whose program is checked by check, a shell
// line run in the program's directory (the node's root).
func healthSvc(check, startPeriod string) string {
	return fmt.Sprintf(`{"module":"svc","run":{"command":"/bin/sh","args":["-c","exec sleep 600"],
	  "health":{"command":["/bin/sh","-c",%q],"interval":"1s","timeout":"1s","failures":2,"start_period":%q}}}`, check, startPeriod)
}

// Rule 23 with health checks (issue 31), with real agents and real
// checks: a wave whose program is running but not yet healthy holds the
// next wave, which starts once the check passes; a program that turns
// unhealthy on its new build halts the rollout with the node and the
// check's words, and --auto-revert sends the build back. Fails when a
// wave passes a program still starting, or an unhealthy one does not halt.
func TestARolloutWaitsForHealthyAndHaltsOnUnhealthy(t *testing.T) {
	t.Parallel()
	m := newMesh(t)
	roots := map[string]string{}
	for _, n := range []string{"h-1", "h-2"} {
		m.Enroll(n)
		roots[n] = filepath.Join(t.TempDir(), "root")
		m.AgentWith(n, roots[n], fast)
	}
	m.WriteModule(`{"module":"svc","run":{"command":"/bin/sh","args":["-c","exec sleep 600"]}}`)
	for _, n := range []string{"h-1", "h-2"} {
		m.Assign(n, "svc", nil)
	}
	for _, s := range m.Push("").Sent {
		m.Report(s.Node, s.Digest)
	}
	// The new build is checked: healthy once the file ready exists. Its
	// start period outlasts the test, so until then it is only starting.
	m.WriteModule(healthSvc("test -e ready", "1h"))
	r, err := m.H.Rollouts.StartRollout(m.Ctx, wire.RolloutRequest{CommandID: wire.NewCommandID(), Module: "svc",
		Waves: []wire.WaveSpec{{Name: "one", Selector: "name=h-1"}, {Name: "two", Selector: "name=h-2"}}})
	m.Must(err)
	eventually(t, "h-1's program under the build to start", func() bool {
		m.rolloutState(r.ID)
		return m.runtimeState("h-1", "svc").Health == wire.HealthStarting && m.Status()["h-1"].State == wire.StateCurrent
	})
	for range 3 {
		if ro := m.rolloutState(r.ID); ro.Wave != 0 || ro.State != projections.RolloutRunning {
			t.Fatalf("the next wave started while h-1's program was not yet healthy: %+v", ro)
		}
	}
	m.Must(os.WriteFile(filepath.Join(roots["h-1"], "ready"), nil, 0o644))
	eventually(t, "the next wave once h-1 is healthy", func() bool { return m.rolloutState(r.ID).Wave == 1 })
	m.Must(os.WriteFile(filepath.Join(roots["h-2"], "ready"), nil, 0o644))
	eventually(t, "the rollout to finish once h-2 is healthy", func() bool { return m.rolloutState(r.ID).State == projections.RolloutFinished })

	// A build whose check fails on h-2 (it finds broken there): unhealthy
	// after h-2 applied it, which halts the rollout and sends it back.
	m.Must(os.WriteFile(filepath.Join(roots["h-2"], "broken"), nil, 0o644))
	m.WriteModule(healthSvc("test -e ready && ! test -e broken || { echo found broken >&2; exit 1; }", "0s"))
	r, err = m.H.Rollouts.StartRollout(m.Ctx, wire.RolloutRequest{CommandID: wire.NewCommandID(), Module: "svc", AutoRevert: true,
		Waves: []wire.WaveSpec{{Name: "all", Selector: "*"}}})
	m.Must(err)
	// The revert is a step of its own, after the halt: waiting for the
	// halt alone read it before the revert landed, on a loaded machine.
	eventually(t, "the unhealthy program to halt the rollout, and the revert", func() bool {
		ro := m.rolloutState(r.ID)
		return ro.State == projections.RolloutHalted && ro.Reverted
	})
	if ro := m.rolloutState(r.ID); ro.Node != "h-2" || !strings.Contains(ro.Why, "its program is unhealthy: 2 failed check(s) in a row; the check /bin/sh exited with code 1: found broken") || !ro.Reverted {
		t.Fatalf("the halt: %+v", ro)
	}
	m.Verified()
}
