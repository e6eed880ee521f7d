package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/meshctl/mesh/cmd/mesh/daemon"
	"github.com/meshctl/mesh/embedded/embeddedtest"
)

// fleetSize is how many real agents the fleet test runs (MESH_FLEET
// overrides it, for measuring a larger fleet the same way). It is 500, not
// the 2,000 it was: what it asserts (every agent follows with no consumer
// of its own, every push reaches and comes back from each) holds of 500 as
// of 2,000, the bound on applies at once that a larger fleet may meet is
// TestFleetBoundsAppliesToTheOpenFileLimit's, and 2,000 took 14 to 20 s of
// both cores, a third of the suite. Under the race detector (just race) it
// is 200: 2,000 agents there, each several times slower, let 1,432 reports
// pass their two seconds' wait for the bus, which says nothing about the
// mesh.
func fleetSize(t *testing.T) int {
	if s := os.Getenv("MESH_FLEET"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("MESH_FLEET=%q is not a number", s)
		}
		return n
	}
	if raceDetector {
		return 200
	}
	return 500
}

// A fleet of real agents on one mesh up, on its closed bus: every agent
// follows without a consumer of its own, every push reaches every agent,
// and each applies it and says so (rule 25; issue 13's harness in CI).
func TestFleet(t *testing.T) {
	t.Parallel()
	// Not beside the others (t.Parallel): its agents connect 64 at a time
	// through the controller's callout, which the bus gives 2 s (its auth
	// timeout) to decide each, and beside the others' work on a loaded
	// box the callout took longer (Authorization Violation). No bus from
	// the environment (TestMain unsets it).
	if testing.Short() {
		t.Skip("a fleet of thousands of agents")
	}
	home := t.TempDir()
	up(t, home)
	manifest := filepath.Join(t.TempDir(), "tool.json")
	os.WriteFile(manifest, []byte(`{"module":"tool","requires":["linux"],"resources":[{"kind":"directory","path":"/etc/tool","mode":"0755"},`+
		`{"kind":"file","path":"/etc/tool/tool.conf","mode":"0644","template":"# {{.Node.Name}}\n"}]}`), 0o600)
	if r := mesh(t, home, "module", "register", manifest); r.code != 0 {
		t.Fatal(r.err)
	}
	n := fleetSize(t)
	first := t.TempDir()
	r := mesh(t, home, "fleet", "--agents", strconv.Itoa(n), "--assign", "tool", "--push", "2", "--dir", first,
		// A report is waited for as every wait of the tests is: on a loaded
		// box 2,000 at once outlast an agent's own 5 s (and it warns).
		"--agent-timeout", embeddedtest.Settle.String())
	t.Log("\n" + r.out + r.err)
	if r.code != 0 {
		t.Fatalf("mesh fleet: exit %d", r.code)
	}
	fleetOut := r.out
	following := regexp.MustCompile(`(\d+) agent\(s\) connected and following in .*; consumers on the stream: (\d+) before, (\d+) now`).FindStringSubmatch(r.out)
	if following == nil || following[1] != strconv.Itoa(n) || following[2] != following[3] {
		t.Fatalf("the fleet did not follow, or its agents added consumers: %q", following)
	}
	for _, round := range []string{"push 1", "push 2"} {
		want := round + ": sent " + strconv.Itoa(n) + " of " + strconv.Itoa(n)
		all := "all " + strconv.Itoa(n) + " fleet agent(s) reported"
		applied := "(" + strconv.Itoa(n) + " applied, 0 failed, 0 refused)"
		if !strings.Contains(r.out, want) || !strings.Contains(r.out, all) || !strings.Contains(r.out, applied) {
			t.Fatalf("%s did not reach and come back from every agent", round)
		}
	}
	if r = mesh(t, home, "status"); r.code != 0 || !strings.Contains(r.out, "well") {
		t.Fatalf("status after the fleet's pushes: exit %d\n%s", r.code, r.out)
	}
	// Each agent made its keys and enrolled them with its node's token, as
	// an operator's machine does, so what the fleet measures includes the
	// fold's check of each report's own signature (issue 29).
	if !strings.Contains(fleetOut, strconv.Itoa(n)+" token(s) made for the agents") {
		t.Fatalf("the fleet did not say it made its agents' tokens:\n%s", fleetOut)
	}
	last := fmt.Sprintf("fleet-%05d", n-1)
	if r = mesh(t, home, "audit", last, "--json"); r.code != 0 || !regexp.MustCompile(`"own_keys":\s*true`).MatchString(r.out) {
		t.Fatalf("%s's audit: exit %d, its keys not its own:\n%s%s", last, r.code, r.out, r.err)
	}
	// A fleet again in a new directory: its first nodes' keys are in the
	// last one's, so this fleet's agents are new machines for them and are
	// re-keyed, as an operator re-keys a replaced machine; every one applies.
	second := t.TempDir()
	r = mesh(t, home, "fleet", "--agents", "3", "--push", "1", "--dir", second, "--agent-timeout", embeddedtest.Settle.String())
	if r.code != 0 || !strings.Contains(r.out, "0 token(s) made for the agents to enrol the keys they make, 3 node(s) re-keyed") || !strings.Contains(r.out, "(3 applied, 0 failed, 0 refused)") {
		t.Fatalf("a fleet in a new directory over nodes with keys: exit %d\n%s%s", r.code, r.out, r.err)
	}
	if r = mesh(t, home, "audit", "fleet-00000"); r.code != 0 || !strings.Contains(r.out, "re-keyed by an operator") {
		t.Fatalf("fleet-00000 was not re-keyed for the new fleet's agent: exit %d\n%s%s", r.code, r.out, r.err)
	}
	// Again in that directory: its agents hold their keys, and need no token.
	r = mesh(t, home, "fleet", "--agents", "3", "--push", "1", "--dir", second, "--agent-timeout", embeddedtest.Settle.String())
	if r.code != 0 || !strings.Contains(r.out, "0 token(s) made for the agents to enrol the keys they make, 0 node(s) re-keyed for this fleet's agents (their keys were an agent's elsewhere), 3 agent(s) with their keys already") {
		t.Fatalf("a fleet again in its own directory: exit %d\n%s%s", r.code, r.out, r.err)
	}
	// In the first directory, whose keys for those nodes were replaced: one
	// sentence naming the node and the remedy, not the bus's bare refusal.
	r = mesh(t, home, "fleet", "--agents", "3", "--push", "1", "--dir", first, "--agent-timeout", embeddedtest.Settle.String())
	if r.code == 0 || !strings.Contains(r.err, "fleet-00000") || !strings.Contains(r.err, "re-keyed since") || !strings.Contains(r.err, "fresh --dir") {
		t.Fatalf("a fleet in a directory whose keys were replaced: exit %d\n%s%s", r.code, r.out, r.err)
	}
}

// A simulated fleet on an open bus: every node's report key recorded and
// every declaration answered, signed and MAC'd as the node's, so that the
// fold believes each one and status is well. On mesh up's closed bus the
// same command is refused in one sentence: a node's reports are its own.
func TestSimulatedFleet(t *testing.T) {
	// Beside the others: the bus is given by --bus, not the environment
	// (which TestMain unsets), so nothing here is the process's to set.
	t.Parallel()
	bus := embeddedtest.Server(t).ClientURL()
	home := t.TempDir()
	start(t, "ready", "--home", home, "--bus", bus, "serve", "--open-bus")
	r := mesh(t, home, "--bus", bus, "fleet", "--agents", "500", "--simulate", "--push", "2")
	if r.code != 0 || !strings.Contains(r.out, "(500 applied, 0 failed, 0 refused)") {
		t.Fatalf("a simulated fleet of 500: exit %d\n%s%s", r.code, r.out, r.err)
	}
	// The fleet counts reports as the stream takes them; status says what
	// the controller has folded, which on a loaded box comes a moment
	// after.
	embeddedtest.Eventually(t, "status to say all 500 are current", func() bool {
		r = mesh(t, home, "--bus", bus, "status")
		return r.code == 0 && strings.Contains(r.out, "well: all 500 node(s) current")
	})
	if r = mesh(t, home, "--bus", bus, "foreign", "list"); strings.Contains(r.out, "rp.") {
		t.Fatalf("the simulated reports were set aside as foreign:\n%s", r.out)
	}
	// A push that sends the fleet nothing (app needs a postgres no node
	// provides) has no last report to time: it says why, and fails.
	if r = mesh(t, home, "--bus", bus, "module", "register", "../../examples/app.json"); r.code != 0 {
		t.Fatalf("register app: exit %d\n%s", r.code, r.err)
	}
	r = mesh(t, home, "--bus", bus, "fleet", "--agents", "3", "--prefix", "lonely", "--simulate", "--assign", "app", "--push", "1")
	if r.code == 0 || !strings.Contains(r.err, "3 node(s) not sent; the first, lonely-00000: app needs postgres") || strings.Contains(r.out, "reported") {
		t.Fatalf("a push that sent the fleet nothing: exit %d\n%s%s", r.code, r.out, r.err)
	}

	closed := t.TempDir()
	up(t, closed)
	r = mesh(t, closed, "--timeout", "3s", "fleet", "--agents", "3", "--simulate", "--push", "1")
	if r.code == 0 || !strings.Contains(r.err, "open bus") || strings.Count(r.err, "\n") != 1 {
		t.Fatalf("a simulated fleet on a closed bus: exit %d\n%s", r.code, r.err)
	}
}

// Agents in one process share its descriptor table, which its hard limit
// may keep small: mesh fleet bounds how many apply at once so that none
// reports "too many open files" for the harness's sake, and bounds nothing
// when the table has room for every agent at once.
func TestFleetBoundsAppliesToTheOpenFileLimit(t *testing.T) {
	var was syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &was); err != nil {
		t.Skip(err)
	}
	t.Cleanup(func() { syscall.Setrlimit(syscall.RLIMIT_NOFILE, &was) })
	lowered := syscall.Rlimit{Cur: min(was.Max, 4096), Max: was.Max}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lowered); err != nil || lowered.Cur < 4096 {
		t.Skipf("cannot set the open-file limit to 4096: %v", err)
	}
	// 4096 - 1024 spare - 2000 connections leave 1072: 357 applying.
	if got := daemon.ApplySlots(2000); got != 357 {
		t.Fatalf("2000 agents under a limit of 4096 may apply %d at once, want 357", got)
	}
	if got := daemon.ApplySlots(500); got != 0 {
		t.Fatalf("500 agents under a limit of 4096 have room, yet %d may apply at once", got)
	}
	if got := daemon.ApplySlots(4000); got != 1 {
		t.Fatalf("4000 agents under a limit of 4096: %d may apply at once, want 1 (one at a time, never none)", got)
	}
}
