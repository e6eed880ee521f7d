package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"syscall"
	"time"

	"github.com/meshctl/mesh/compose"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/manifest"
)

// A program's health check (issue 31): while a process of a module whose
// run has a check lives, the agent probes it every interval and reports
// only what changes (RuntimeHealthy, RuntimeUnhealthy), so a program that
// stays healthy costs the bus nothing, and a rollout's gate reads its
// health from the fold (rule 23).

// verdict is what the agent last said of a process's health.
type verdict int

const (
	unsaid verdict = iota // nothing yet since it started: starting
	saidHealthy
	saidUnhealthy
)

// healthCount folds probes into changes of health: Successes passing in a
// row say healthy, Failures failing in a row unhealthy, each only when it
// is not what was said last. Pure, so its thresholds are table tests.
type healthCount struct {
	failures, successes int // the thresholds
	failed, passed      int // in a row, now
	said                verdict
}

// observe takes one probe's outcome (ok; grace: a failure within the
// start period, which does not count toward unhealthy but does end a run
// of successes) and answers the verdict to report, if it changed.
func (c *healthCount) observe(ok, grace bool) (verdict, bool) {
	switch {
	case ok:
		c.passed, c.failed = c.passed+1, 0
		if c.passed >= c.successes && c.said != saidHealthy {
			c.said = saidHealthy
			return saidHealthy, true
		}
	case grace:
		c.passed = 0
	default:
		c.failed, c.passed = c.failed+1, 0
		if c.failed >= c.failures && c.said != saidUnhealthy {
			c.said = saidUnhealthy
			return saidUnhealthy, true
		}
	}
	return unsaid, false
}

// checkHealth probes one process of module until ctx ends (the process
// exited or is being stopped): at once, then every interval.
func (v *supervisor) checkHealth(ctx context.Context, module string, spec compose.Runtime, started time.Time) {
	h := spec.Health
	interval, timeout, startPeriod := h.Durations()
	count := healthCount{failures: h.Failures, successes: h.Successes}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		err := v.probe(ctx, spec, timeout)
		if ctx.Err() != nil {
			return // stopped mid-probe: its failure says nothing of the program
		}
		switch said, changed := count.observe(err == nil, err != nil && time.Since(started) < startPeriod); {
		case changed && said == saidHealthy:
			v.log.Info("program healthy", "module", module)
			v.report(events.RuntimeHealthy{Node: v.node, Module: module})
		case changed && said == saidUnhealthy:
			v.log.Warn("program unhealthy", "module", module, "why", err.Error())
			v.report(events.RuntimeUnhealthy{Node: v.node, Module: module, Failures: count.failed, Reason: bound(err.Error(), maxReason)})
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// probe runs the check once: nil when the program is healthy, else why not
// in one sentence.
func (v *supervisor) probe(ctx context.Context, spec compose.Runtime, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	h := spec.Health
	kind, target := h.Probe()
	switch kind {
	case manifest.ProbeTCP:
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", h.TCP)
		if err != nil {
			return fmt.Errorf("cannot connect to %s: %s", target, dialReason(err, timeout))
		}
		return c.Close()
	case manifest.ProbeHTTP:
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, h.HTTP, nil)
		if err != nil {
			return fmt.Errorf("cannot ask %s: %v", target, err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return fmt.Errorf("GET %s: %s", target, dialReason(err, timeout))
		}
		resp.Body.Close()
		if resp.StatusCode < 200 || resp.StatusCode > 299 {
			return fmt.Errorf("GET %s answered %s", target, resp.Status)
		}
		return nil
	}
	return v.probeCommand(ctx, spec, timeout)
}

// probeCommand runs the check's command as the program runs (its
// directory, user, environment and a process group of its own, killed
// whole at the timeout, so a hung check leaves nothing behind).
func (v *supervisor) probeCommand(ctx context.Context, spec compose.Runtime, timeout time.Duration) error {
	h := spec.Health
	check := spec
	check.Command, check.Args = h.Command[0], h.Command[1:]
	cmd, err := v.command(check)
	words := &lastWords{}
	if err == nil {
		cmd.Stderr = words
		err = cmd.Start()
	}
	if err != nil {
		return fmt.Errorf("cannot run the check %s: %v", h.Command[0], err)
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	select {
	case err = <-waited:
	case <-ctx.Done():
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-waited
		return fmt.Errorf("the check %s did not finish within %s", h.Command[0], timeout)
	}
	if err == nil {
		return nil
	}
	why := exitReport(v.node, spec.Module, cmd, err).Detail()
	if last := words.line(); last != "" {
		why += ": " + last
	}
	return fmt.Errorf("the check %s %s", h.Command[0], why)
}

// lastWords keeps the last bytes a check wrote to its standard error,
// whose last line says why it failed (exec copies into it from one
// goroutine, and Wait returns after the copy ends).
type lastWords struct{ b []byte }

const lastWordsBytes = 1024

func (w *lastWords) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	if len(w.b) > lastWordsBytes {
		w.b = append([]byte(nil), w.b[len(w.b)-lastWordsBytes:]...)
	}
	return len(p), nil
}

// line is the last line that is not blank.
func (w *lastWords) line() string {
	lines := strings.Split(strings.TrimSpace(string(w.b)), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// dialReason says why a connection failed, without the Go error's
// wrapping of the address already named.
func dialReason(err error, timeout time.Duration) string {
	var op *net.OpError
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Sprintf("no answer within %s", timeout)
	case errors.As(err, &op) && op.Err != nil:
		return op.Err.Error()
	}
	return err.Error()
}
