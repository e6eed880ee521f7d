package web

import (
	"github.com/meshctl/mesh/wire"
	"github.com/prometheus/client_golang/prometheus"
)

// A program's health on /metrics (issue 31): what status says after
// "running", counted the way status counts it, so an alert and the
// command line never disagree. Only a running program has a health: an
// exited one's last check, or one on an unreachable node, says nothing
// of now, and status shows none for them either.
var (
	descHealth = prometheus.NewDesc("mesh_runtime_health",
		"Running programs with a health check, by what it last said (healthy, unhealthy, starting).", []string{"health"}, nil)
	descUnhealthy = prometheus.NewDesc("mesh_runtime_unhealthy",
		"1 for each running program whose health check says unhealthy, by node and module (no series while none is).", []string{"node", "module"}, nil)
)

// collectHealth exports the programs' health from status's runtimes.
// Every health is exported, zero or not, so that an alert on unhealthy
// programs sees them go to 0 rather than a series vanish; the programs
// are named only while unhealthy, which bounds their series by what is
// wrong rather than by the fleet.
func collectHealth(ch chan<- prometheus.Metric, runtimes []wire.Runtime) {
	count := map[wire.Health]int{wire.HealthHealthy: 0, wire.HealthUnhealthy: 0, wire.HealthStarting: 0}
	for _, rt := range runtimes {
		if rt.State != wire.RuntimeRunning || rt.Health == "" {
			continue
		}
		count[rt.Health]++
		if rt.Health == wire.HealthUnhealthy {
			ch <- prometheus.MustNewConstMetric(descUnhealthy, prometheus.GaugeValue, 1, rt.Node, rt.Module)
		}
	}
	for h, n := range count {
		ch <- prometheus.MustNewConstMetric(descHealth, prometheus.GaugeValue, float64(n), string(h))
	}
}
