package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// mesh bench in small (issue 34): every row of the table, each with its
// figure, floor, ratio and verdict, and a CPU line for every process; the
// exit rule holds each ratio to its bound, so a bound nobody could meet
// fails the run, names its row and by how much, and the rows within their
// bounds are said to be. No figure is asserted: a tiny fleet on a loaded
// box measures nothing worth holding to.
func TestBenchPrintsEveryRowAndFailsOnARowOverItsBound(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts two buses, two controllers and two fleets")
	}
	dir := filepath.Join(t.TempDir(), "bench")
	// A process of its own, as an operator runs it: the bus's row is this
	// process's CPU, which the tests beside it would otherwise add to.
	cmd := exec.Command(os.Args[0], "--home", t.TempDir(), "bench", "--nodes", "100", "--agents", "10", "--warmup", "1", "--pushes", "1", "--idle", "1s", "--dir", dir,
		"--bound", "bus=0.000001", "--bound", "controller=1000000", "--bound", "real=1000000", "--bound", "sockets=1000000")
	cmd.Env = append(os.Environ(), "MESH_TEST_MAIN=1")
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	out, errs := stdout.String(), stderr.String()
	t.Log("\n" + out + errs)
	if cmd.ProcessState.ExitCode() != 1 {
		t.Fatalf("a bound nobody could meet: %v, want exit 1", err)
	}
	// A tiny fleet may cost a process less than the system counts: such a
	// row says it has no figure, and fails the run too.
	verdict := `(none|\S+x +(within|OVER by \d+%|NO FIGURE))`
	for _, row := range []string{"controller", "bus \\(nats-server\\)", "simulated nodes", "controller \\+ bus, real agents", "the same, sockets and signatures priced in"} {
		re := regexp.MustCompile(`(?m)^  ` + row + ` +\d+\.\d µs \(\d+\.\d-\d+\.\d\) +\d+\.\d µs \([^)]+\) +\d+\.\d\dx +` + verdict + `\s*$`)
		if !re.MatchString(out) {
			t.Errorf("no row %s with its figure, floor, ratio and verdict", row)
		}
	}
	if !regexp.MustCompile(`(?m)^  bus \(nats-server\) .*(OVER by \d+%|NO FIGURE)\s*$`).MatchString(out) || strings.Contains(out, "every row within its bound") {
		t.Error("the bus, held to a bound nobody could meet, is not said to fail it")
	}
	// The floor measured a round before each simulated push and one after
	// the last, so that each push is held against the rounds around it:
	// one push, two rounds.
	if !regexp.MustCompile(`(?m)^floor of this machine, .*measured before each of the 1 simulated push\(es\) and after the last: the median of those, each the median of three rounds of \d+\):$`).MatchString(out) {
		t.Error("the floor does not say it was measured a round before each push and after the last")
	}
	if !strings.Contains(out, "ratio: the median of each push against the mean of the floor's rounds just before and just after it") {
		t.Error("the table does not say its ratios hold each push against the floor around it")
	}
	// The bus's floor for real agents, its own agents a process apart.
	for _, line := range []string{"each agent on a socket of its own, answering within", "every agent on one shared socket", "a socket's price, bus and hub"} {
		if !regexp.MustCompile(`(?m)^  ` + regexp.QuoteMeta(line) + `.* \d+\.\d µs\s*$`).MatchString(out) {
			t.Errorf("no line of the sockets' floor saying %q with its figure", line)
		}
	}
	// Each process's line says its pages faulted in, and what its one
	// warm-up push cost, which no figure counts.
	procs := regexp.MustCompile(`(?m)^  (simulated, 100|real agents, 10) node\(s\) +(controller|bus|fleet) +\d+\.\d\d s \(.*\) +\d+(\.\dk)? pages? +at rest .* MiB +warm-up: \d+\.\d\d s, \d+(\.\dk)? pages?\s*$`).FindAllString(out, -1)
	if len(procs) != 6 {
		t.Errorf("%d lines of CPU seconds, pages faulted in and a warm-up push per process, want 6 (three processes, two fleets)", len(procs))
	}
	if n := strings.Count(errs, ", warm-up push 1 (held to no bound): "); n != 2 {
		t.Errorf("%d warm-up pushes said as they were made, want one a fleet", n)
	}
	// The figures are the measured pushes', one a fleet here, and the
	// table says what came before them and what the first push cost.
	if n := strings.Count(errs, ", push 1: "); n != 2 || strings.Contains(errs, ", push 2: ") {
		t.Errorf("%d measured pushes said, want one a fleet:\n%s", n, errs)
	}
	// The floor's rounds around each measured push are said beside it, in
	// order: the table holds each push against them, and they are a
	// reader's to check.
	round := `: sign \d+\.\d µs, publish \d+\.\d µs, read \d+\.\d µs, verify (?:[1-9]\d*\.\d|0\.[1-9]) µs\n`
	if !regexp.MustCompile(`(?m)^simulated, the floor before push 1`+round+`simulated, push 1: .*\nsimulated, the floor after push 1`+round).MatchString(errs) ||
		strings.Count(errs, "simulated, the floor ") != 2 {
		t.Errorf("the floor's rounds before and after the one measured push are not said once each, around it:\n%s", errs)
	}
	for _, line := range []string{"after 1 warm-up push(es) to each fleet, in no figure but the first push's row", "  controller, its first push (a warm-up)  "} {
		if !strings.Contains(out, line) {
			t.Errorf("the table does not say %q", line)
		}
	}
	// Real agents are held to a report's signature check too (they made
	// their own keys): a floor that measured none would price in nothing.
	if !regexp.MustCompile(`(?m)^  ed25519 verify of 420 bytes \(a report's, for real agents\) +(?:[1-9]\d*\.\d|0\.[1-9]) µs$`).MatchString(out) {
		t.Error("the floor does not say a report's verification, or says it cost nothing")
	}
	if !regexp.MustCompile(`(?m)^  a round of all four faulted in \d+(\.\dk)? pages? \(`).MatchString(out) {
		t.Error("the floor does not say the pages its rounds faulted in")
	}
	if !regexp.MustCompile(`mesh: .*bus \(nats-server\)`).MatchString(errs) {
		t.Error("stderr does not name the bus's row")
	}
	if _, err := os.Stat(filepath.Join(dir, "real", "controller.log")); err != nil {
		t.Errorf("a --dir given is kept, with each process's log: %v", err)
	}
}

// What mesh bench cannot do as asked it refuses before it starts anything,
// in one sentence naming the remedy, and leaves a directory it was given
// as it was.
func TestBenchRefusesWhatItCannotMeasure(t *testing.T) {
	t.Parallel()
	full := t.TempDir()
	os.WriteFile(filepath.Join(full, "keep"), []byte("mine"), 0o600)
	for _, c := range []struct {
		args []string
		says string
	}{
		{[]string{"--bound", "memory=2"}, "--bound memory=2 names no row: give one of [bus controller nodes real sockets]"},
		{[]string{"--bound", "bus=0"}, "a bound is a ratio above 0"},
		{[]string{"--nodes", "0"}, "give at least 1 simulated node"},
		{[]string{"--pushes", "0"}, "--pushes 0: give at least 1"},
		{[]string{"--warmup=-1"}, "--warmup -1: give 0 (measure from the first push) or more"},
		{[]string{"--idle", "1ms"}, "--idle 1ms: give at least 100ms"},
		{[]string{"--dir", full}, "is not empty: mesh bench starts from nothing there"},
	} {
		r := mesh(t, t.TempDir(), append([]string{"bench"}, c.args...)...)
		if r.code != 2 || !strings.Contains(r.err, c.says) || strings.Count(strings.TrimSpace(r.err), "\n") != 0 {
			t.Errorf("mesh bench %v: exit %d, %q; want 2 and one line saying %q", c.args, r.code, r.err, c.says)
		}
	}
	if b, err := os.ReadFile(filepath.Join(full, "keep")); err != nil || string(b) != "mine" {
		t.Errorf("the directory refused was changed: %q, %v", b, err)
	}
	if entries, _ := os.ReadDir(full); len(entries) != 1 {
		t.Errorf("the directory refused holds %d entries, want its one", len(entries))
	}
}
