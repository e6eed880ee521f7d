package manifest

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Health is how the agent asks a module's program whether it serves, not
// only whether it runs (issue 31): exactly one probe (a command, a TCP
// connection, an HTTP GET), every Interval, each given Timeout. Failures
// probes failing in a row make the program unhealthy, Successes in a row
// healthy again; a probe failing within StartPeriod of the program's start
// does not count, so a program that takes a while to open its port is not
// called unhealthy for it. A rollout's gate waits for healthy (rule 23).
//
// Parse fills in the defaults, so the canonical form, the build and the
// declaration say every value the agent uses: a later default never
// changes what a registered build does.
type Health struct {
	// Command is a program and its arguments, run as the module's program
	// is (its directory, user and environment): exit 0 is healthy.
	Command []string `json:"command,omitempty"`
	// TCP is host:port on the node: a connection accepted is healthy.
	TCP string `json:"tcp,omitempty"`
	// HTTP is an http or https URL on the node: a 2xx answer is healthy.
	HTTP string `json:"http,omitempty"`

	Interval    string `json:"interval,omitempty"`
	Timeout     string `json:"timeout,omitempty"`
	StartPeriod string `json:"start_period,omitempty"`
	Failures    int    `json:"failures,omitempty"`
	Successes   int    `json:"successes,omitempty"`
}

// The defaults of a check, and the bounds of its values.
const (
	DefaultHealthInterval = 10 * time.Second
	DefaultHealthTimeout  = 5 * time.Second
	DefaultHealthFailures = 3
	// MinHealthInterval bounds how often a probe runs: it costs the node
	// a process or a connection each time.
	MinHealthInterval = 100 * time.Millisecond
	// MaxHealthCount bounds Failures and Successes: past it a check says
	// nothing for longer than anyone waits.
	MaxHealthCount = 100
)

// Probe kinds, as HealthProbe names them.
const (
	ProbeCommand = "command"
	ProbeTCP     = "tcp"
	ProbeHTTP    = "http"
)

// Probe is which probe the check runs, and its target said for people.
func (h Health) Probe() (kind, target string) {
	switch {
	case len(h.Command) > 0:
		return ProbeCommand, strings.Join(h.Command, " ")
	case h.TCP != "":
		return ProbeTCP, h.TCP
	}
	return ProbeHTTP, h.HTTP
}

// String says the check in one line, for a plan's diff; "none" for none.
func (h *Health) String() string {
	if h == nil {
		return "none"
	}
	kind, target := h.Probe()
	return fmt.Sprintf("%s %s every %s (timeout %s, start period %s, unhealthy after %d failure(s), healthy after %d success(es))",
		kind, target, h.Interval, h.Timeout, h.StartPeriod, h.Failures, h.Successes)
}

// Durations are the check's interval, timeout and start period. Only a
// check that passed validation is asked: its values parse.
func (h Health) Durations() (interval, timeout, start time.Duration) {
	interval, _ = time.ParseDuration(h.Interval)
	timeout, _ = time.ParseDuration(h.Timeout)
	start, _ = time.ParseDuration(h.StartPeriod)
	return interval, timeout, start
}

// normalise fills the defaults in, and writes each duration one way
// ("1000ms" is "1s"), so the same check is the same build however it was
// written. A duration that does not parse is left for validate to name.
func (h *Health) normalise() {
	for _, d := range []struct {
		s   *string
		def time.Duration
	}{{&h.Interval, DefaultHealthInterval}, {&h.Timeout, DefaultHealthTimeout}, {&h.StartPeriod, 0}} {
		if *d.s == "" {
			*d.s = d.def.String()
		} else if v, err := time.ParseDuration(*d.s); err == nil {
			*d.s = v.String()
		}
	}
	if h.Failures == 0 {
		h.Failures = DefaultHealthFailures
	}
	if h.Successes == 0 {
		h.Successes = 1
	}
}

func (h Health) validate() error {
	probes := 0
	for _, set := range []bool{len(h.Command) > 0, h.TCP != "", h.HTTP != ""} {
		if set {
			probes++
		}
	}
	if probes != 1 {
		return errors.New(`give exactly one probe: "command" (a program and its arguments), "tcp" (host:port on the node) or "http" (a URL on the node)`)
	}
	// A templated target is checked once rendered, at composition
	// (Run.Rendered): "127.0.0.1:{{.Settings.port}}" is no host:port yet.
	if !isTemplate(h.TCP) && !isTemplate(h.HTTP) {
		if err := h.validateProbe(); err != nil {
			return err
		}
	}
	durations := map[string]string{"interval": h.Interval, "timeout": h.Timeout, "start_period": h.StartPeriod}
	for _, name := range []string{"interval", "timeout", "start_period"} {
		if d, err := time.ParseDuration(durations[name]); err != nil || d < 0 {
			return fmt.Errorf("%s %q is not a duration such as 10s or 500ms", name, durations[name])
		}
	}
	interval, timeout, _ := h.Durations()
	switch {
	case interval < MinHealthInterval:
		return fmt.Errorf("interval %s is shorter than %s; probe less often", interval, MinHealthInterval)
	case timeout <= 0 || timeout > interval:
		return fmt.Errorf("timeout %s must be more than 0 and at most the interval (%s); shorten it or lengthen the interval", timeout, interval)
	case h.Failures < 1 || h.Failures > MaxHealthCount:
		return fmt.Errorf("failures %d must be 1 to %d: how many probes failing in a row make the program unhealthy", h.Failures, MaxHealthCount)
	case h.Successes < 1 || h.Successes > MaxHealthCount:
		return fmt.Errorf("successes %d must be 1 to %d: how many probes passing in a row make the program healthy", h.Successes, MaxHealthCount)
	}
	return nil
}

func (h Health) validateProbe() error {
	switch {
	case len(h.Command) > 0:
		if strings.TrimSpace(h.Command[0]) == "" {
			return errors.New("command's first word is empty: name the program that checks")
		}
		for _, a := range h.Command {
			if strings.ContainsRune(a, 0) {
				return errors.New("command holds a NUL byte")
			}
		}
	case h.TCP != "":
		host, port, err := net.SplitHostPort(h.TCP)
		if p, perr := strconv.Atoi(port); err != nil || host == "" || perr != nil || p < 1 || p > 65535 {
			return fmt.Errorf("tcp %q is not host:port, such as 127.0.0.1:8080", h.TCP)
		}
	default:
		u, err := url.Parse(h.HTTP)
		if err != nil || u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
			return fmt.Errorf("http %q is not an http or https URL, such as http://127.0.0.1:8080/healthz", h.HTTP)
		}
	}
	return nil
}
