package web_test

import (
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/meshctl/mesh/agent"
	"github.com/meshctl/mesh/agent/agenttest"
	"github.com/meshctl/mesh/embedded/embeddedtest"
	"github.com/meshctl/mesh/web"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Programs' health on /metrics (issue 31), from real programs checked by
// a real agent: each health counted as status says it (only running
// programs with a check), every health exported at zero too, and the
// unhealthy program named by node and module. Fails when a health is
// missing, miscounted, or the program that is unhealthy is not named.
func TestMetricsSayEachProgramsHealth(t *testing.T) {
	t.Parallel()
	m := agenttest.New(t)
	m.Enroll("box")
	m.AgentWith("box", filepath.Join(t.TempDir(), "root"), func(c *agent.Config) {
		c.Supervision = agent.Supervision{RestartMin: 20 * time.Millisecond, RestartMax: 80 * time.Millisecond, LoopExits: 3, LoopWindow: time.Minute, Grace: 2 * time.Second}
	})
	checked := func(module, check, more string) string {
		return fmt.Sprintf(`{"module":%q,"run":{"command":"/bin/sh","args":["-c","exec sleep 600"],
		  "health":{"command":["/bin/sh","-c",%q],"interval":"1s","timeout":"1s","failures":1%s}}}`, module, check, more)
	}
	m.WriteModule(checked("good", "exit 0", ""))
	m.WriteModule(checked("bad", "echo no greeting >&2; exit 1", ""))
	m.WriteModule(checked("slow", "exit 1", `,"start_period":"1h"`)) // failing within its start period: starting
	m.WriteModule(`{"module":"plain","run":{"command":"/bin/sh","args":["-c","exec sleep 600"]}}`)
	for _, module := range []string{"good", "bad", "slow", "plain"} {
		m.Assign("box", module, nil)
	}
	m.Report("box", m.Push("box").Sent[0].Digest)

	srv, err := web.Start(web.Options{Addr: "127.0.0.1:0"}, m.Ctrl, web.NewMetrics(), slog.New(slog.DiscardHandler))
	m.Must(err)
	t.Cleanup(func() { srv.Close() })
	var fams map[string]*dto.MetricFamily
	byHealth := func() map[string]float64 {
		out := map[string]float64{}
		for _, mt := range fams["mesh_runtime_health"].GetMetric() {
			out[mt.GetLabel()[0].GetValue()] = mt.GetGauge().GetValue()
		}
		return out
	}
	want := map[string]float64{"healthy": 1, "unhealthy": 1, "starting": 1}
	embeddedtest.Eventually(t, "/metrics to say one program healthy, one unhealthy, one starting", func() bool {
		r, err := http.Get("http://" + srv.Addr + "/metrics")
		m.Must(err)
		defer r.Body.Close()
		p := expfmt.NewTextParser(model.UTF8Validation)
		fams, err = p.TextToMetricFamilies(r.Body)
		m.Must(err)
		got := byHealth()
		return len(got) == 3 && got["healthy"] == want["healthy"] && got["unhealthy"] == want["unhealthy"] && got["starting"] == want["starting"]
	})
	named := fams["mesh_runtime_unhealthy"].GetMetric()
	if len(named) != 1 {
		t.Fatalf("mesh_runtime_unhealthy names %d programs, want bad on box: %v", len(named), named)
	}
	labels := map[string]string{}
	for _, l := range named[0].GetLabel() {
		labels[l.GetName()] = l.GetValue()
	}
	if labels["node"] != "box" || labels["module"] != "bad" || named[0].GetGauge().GetValue() != 1 {
		t.Fatalf("mesh_runtime_unhealthy: %v", named[0])
	}
}
