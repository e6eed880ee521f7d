package text

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/meshctl/mesh/compose"
	"github.com/meshctl/mesh/wire"
)

// Status prints the same lines from the brief table the command line asks
// for as from whole nodes, padded as a table, with the verdict counted from
// the rows.
func TestStatusPrintsTheTableAsTheNodes(t *testing.T) {
	at := time.Date(2026, 12, 3, 16, 52, 36, 0, time.UTC)
	nodes := []wire.NodeStatus{
		{Name: "db-1", State: wire.StateWaiting, Sequence: 4, Since: at},
		{Name: "fleet-00000", State: wire.StateCurrent, Sequence: 12, Since: at},
		{Name: "naïve", State: wire.StateFailed, Sequence: 7, Since: at.Add(time.Second), Detail: "/etc/app/app.conf: permission denied"},
		{Name: "new", State: wire.StateNeverSent},
	}
	table := &wire.StatusTable{States: []wire.State{}}
	for _, n := range nodes {
		table.Add(n)
	}
	var fromNodes, fromTable bytes.Buffer
	Status(&fromNodes, wire.StatusReport{Nodes: nodes})
	Status(&fromTable, wire.StatusReport{Table: table})
	if fromNodes.String() != fromTable.String() {
		t.Fatalf("from nodes:\n%s\nfrom the table:\n%s", fromNodes.String(), fromTable.String())
	}
	var want strings.Builder
	line := func(name, seq, state, since, detail string) {
		fmt.Fprintln(&want, strings.TrimRight(fmt.Sprintf("%-*s  %-*s  %-*s  %-20s  %s", 11, name, 8, seq, 10, state, since, detail), " "))
	}
	line("NODE", "SEQUENCE", "STATE", "SINCE", "DETAIL")
	line("db-1", "4", "waiting", "2026-12-03T16:52:36Z", "")
	line("fleet-00000", "12", "current", "2026-12-03T16:52:36Z", "")
	line("naïve", "7", "failed", "2026-12-03T16:52:37Z", "/etc/app/app.conf: permission denied")
	line("new", "0", "never sent", "0001-01-01T00:00:00Z", "")
	want.WriteString("not well: 3 of 4 node(s) not current, 0 provider(s) failing a consumer\n")
	if fromTable.String() != want.String() {
		t.Fatalf("status printed:\n%q\nwant:\n%q", fromTable.String(), want.String())
	}
}

// Where a requirement has several providers, status says which one each
// consumer receives and why, a line each (issue 31).
func TestStatusNamesTheProviderChosen(t *testing.T) {
	var out bytes.Buffer
	Status(&out, wire.StatusReport{Nodes: []wire.NodeStatus{}, Well: true, Chosen: []wire.ConsumerChoice{
		{ConsumerNode: "app-eu", Chosen: compose.Chosen{Receipt: compose.Receipt{Consumer: "app", Requirement: "postgres", Node: "db-eu", Module: "postgres"}, Why: "shares zone=eu"}},
	}})
	if !strings.Contains(out.String(), "\napp on app-eu receives postgres from postgres on db-eu (shares zone=eu)\n") {
		t.Fatalf("status printed:\n%s", out.String())
	}
}

// Each stage of a rotation reads as its own sentence: an overlap names
// its bound and whom it waits on, a completion when and why, a rotation
// with no overlap that the old went at once. Fails when a stage prints
// another's sentence or drops its facts.
func TestRotationLineSaysEachStage(t *testing.T) {
	at := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	base := wire.RotationStage{Provider: "postgres", Consumer: "app", Generation: 2, At: at}
	with := func(f func(*wire.RotationStage)) wire.RotationStage { r := base; f(&r); return r }
	cases := []struct {
		r    wire.RotationStage
		want string
	}{
		{with(func(r *wire.RotationStage) {
			r.Stage, r.Until, r.Waiting = wire.RotationOverlap, at.Add(24*time.Hour), []string{"app-1", "app-2"}
		}), "rotation of the credentials postgres mints for app to generation 2: overlap, the old and the new accepted until 2026-12-06T10:00:00Z at most; waiting on app-1, app-2 to apply it"},
		{with(func(r *wire.RotationStage) { r.Stage, r.Until = wire.RotationOverlap, at.Add(time.Hour) }),
			"overlap, the old and the new accepted until 2026-12-05T11:00:00Z at most; every consumer end applied it; the controller drops the old at its next drive"},
		{with(func(r *wire.RotationStage) {
			r.Stage, r.CompletedAt, r.Reason = wire.RotationCompleted, at.Add(time.Hour), "bound passed"
		}), "to generation 2: completed 2026-12-05T11:00:00Z (bound passed), the old dropped"},
		{with(func(r *wire.RotationStage) { r.Stage = wire.RotationAtOnce }), "to generation 2: at once 2026-12-05T10:00:00Z, no overlap"},
	}
	for _, c := range cases {
		if got := RotationLine(c.r); !strings.Contains(got, c.want) {
			t.Errorf("%+v:\n got %q\nwant %q in it", c.r, got, c.want)
		}
	}
}

// Each program's health follows its state (issue 31): healthy since when,
// unhealthy since when and why (a node's words, escaped), starting; none
// for a program without a check or not running; an unhealthy program is
// counted with those not running.
func TestStatusSaysEachProgramsHealth(t *testing.T) {
	at := time.Date(2026, 12, 3, 16, 52, 36, 0, time.UTC)
	run := func(module, health, detail string) wire.Runtime {
		return wire.Runtime{Node: "web-1", Module: module, State: wire.RuntimeRunning, Since: at, Detail: "pid 7, declaration 2",
			Health: wire.Health(health), HealthSince: at.Add(time.Minute), HealthDetail: detail}
	}
	var out bytes.Buffer
	Status(&out, wire.StatusReport{Nodes: []wire.NodeStatus{{Name: "web-1", State: wire.StateCurrent, Since: at}}, Runtimes: []wire.Runtime{
		run("a", "healthy", ""), run("b", "unhealthy", "3 failed check(s) in a row; GET http://127.0.0.1:8080/ answered 503\x1b[2J"),
		run("c", "starting", ""), run("d", "", ""),
		{Node: "web-1", Module: "e", State: wire.RuntimeExited, Since: at, Detail: "exited with code 1", Health: wire.HealthHealthy, HealthSince: at},
	}})
	for _, want := range []string{
		"\na on web-1 running since 2026-12-03T16:52:36Z: pid 7, declaration 2; healthy since 2026-12-03T16:53:36Z\n",
		"\nb on web-1 running since 2026-12-03T16:52:36Z: pid 7, declaration 2; unhealthy since 2026-12-03T16:53:36Z: \"3 failed check(s) in a row; GET http://127.0.0.1:8080/ answered 503\\x1b[2J\"\n",
		"\nc on web-1 running since 2026-12-03T16:52:36Z: pid 7, declaration 2; starting: its health check has not passed yet\n",
		"\nd on web-1 running since 2026-12-03T16:52:36Z: pid 7, declaration 2\n",
		"\ne on web-1 exited since 2026-12-03T16:52:36Z: exited with code 1\n",
		"\nnot well: 1 node(s) current, nothing failing, but 2 program(s) not running or unhealthy\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("status printed:\n%s\nwithout %q", out.String(), want)
		}
	}
}

// node show says a program's health on its runs line as status does.
func TestNodeShowSaysAProgramsHealth(t *testing.T) {
	at := time.Date(2026, 12, 3, 16, 52, 36, 0, time.UTC)
	var out bytes.Buffer
	if err := Node(&out, wire.NodeView{Name: "web-1", Runtimes: []wire.Runtime{{Node: "web-1", Module: "greeter", State: wire.RuntimeRunning, Since: at,
		Detail: "pid 7, declaration 2", Health: wire.HealthUnhealthy, HealthSince: at, HealthDetail: "1 failed check(s) in a row; GET http://127.0.0.1:4281/healthz answered 503 Service Unavailable"}}}); err != nil {
		t.Fatal(err)
	}
	if want := "greeter running since 2026-12-03T16:52:36Z: pid 7, declaration 2; unhealthy since 2026-12-03T16:52:36Z: 1 failed check(s) in a row; GET http://127.0.0.1:4281/healthz answered 503 Service Unavailable\n"; !strings.Contains(out.String(), want) {
		t.Fatalf("node show printed:\n%s\nwithout %q", out.String(), want)
	}
}

// A moment wider than the column (a year past 9999, which a table's
// seconds can hold) still leaves two spaces before the detail.
func TestStatusPadsACellWiderThanItsColumn(t *testing.T) {
	table := &wire.StatusTable{States: []wire.State{}}
	table.Add(wire.NodeStatus{Name: "far", State: wire.StateFailed, Sequence: 1, Since: time.Date(12026, 1, 1, 0, 0, 0, 0, time.UTC), Detail: "why"})
	var out bytes.Buffer
	Status(&out, wire.StatusReport{Table: table})
	if line := strings.Split(out.String(), "\n")[1]; !strings.HasSuffix(line, "12026-01-01T00:00:00Z  why") {
		t.Fatalf("the row is %q, want the moment and two spaces before its detail", line)
	}
}
