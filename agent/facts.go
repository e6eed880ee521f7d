package agent

import (
	"bufio"
	"context"
	"maps"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"github.com/meshctl/mesh/events"
)

// The detectors: what an agent says of its machine, as facts (templates
// read .Node.Facts.NAME) and capabilities (a module's requires is met by
// them as by the operator's declared ones).
//
//	os        the operating system (runtime.GOOS): also a capability, "linux"
//	arch      the architecture (runtime.GOARCH): also a capability, "amd64", "arm64"
//	cpus      how many CPUs the agent may use
//	hostname  the machine's host name
//	kernel    the kernel's release (/proc/sys/kernel/osrelease), where there is one
//	distro    the distribution's ID (/etc/os-release), where there is one
//	systemd   "yes" when systemd runs the machine (/run/systemd/system): also a capability, "systemd"
//
// They read the machine, not the agent's root: the root is where the
// mesh writes, the machine is what runs it.
func detectFacts() (map[string]string, []string) {
	facts := map[string]string{"os": runtime.GOOS, "arch": runtime.GOARCH, "cpus": strconv.Itoa(runtime.NumCPU())}
	caps := []string{runtime.GOOS, runtime.GOARCH}
	if h, err := os.Hostname(); err == nil {
		facts["hostname"] = h
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		facts["kernel"] = strings.TrimSpace(string(b))
	}
	if id := osRelease("ID"); id != "" {
		facts["distro"] = id
	}
	if fi, err := os.Stat("/run/systemd/system"); err == nil && fi.IsDir() {
		facts["systemd"] = "yes"
		caps = append(caps, "systemd")
	}
	slices.Sort(caps)
	return facts, caps
}

// osRelease reads one field of /etc/os-release.
func osRelease(field string) string {
	f, err := os.Open("/etc/os-release")
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field+"="); ok {
			return strings.Trim(v, `"'`)
		}
	}
	return ""
}

// reportFacts detects the machine's facts and reports them when they are
// not what it reported last (at its first start, and when they change).
func (a *Agent) reportFacts(ctx context.Context) {
	facts, caps := a.cfg.Facts()
	a.mu.Lock()
	defer a.mu.Unlock()
	if maps.Equal(facts, a.state.Facts) && slices.Equal(caps, a.state.FactCaps) {
		return
	}
	a.state.Facts, a.state.FactCaps = facts, caps
	a.cfg.Log.Info("facts of this machine", "facts", factLine(facts))
	a.send(ctx, reportID("f", 0, a.cfg.Join.Node), events.NodeFactsReported{Node: a.cfg.Join.Node, Facts: facts, Capabilities: caps})
}

func factLine(facts map[string]string) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(facts)) {
		parts = append(parts, k+"="+facts[k])
	}
	return strings.Join(parts, " ")
}
