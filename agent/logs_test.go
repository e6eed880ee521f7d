package agent_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/meshctl/mesh/agent"
	"github.com/meshctl/mesh/aggregates"
	"github.com/meshctl/mesh/client"
	"github.com/meshctl/mesh/embedded/embeddedtest"
	"github.com/meshctl/mesh/wire"
)

// logs reads module's whole log on node, as mesh logs does: over the bus,
// from its agent.
func (m *mesh) logs(node, module string) ([]wire.LogLine, error) {
	m.T.Helper()
	c := client.Client{NC: embeddedtest.Conn(m.T, m.Srv), Where: "the test's bus"}
	r, err := c.LogsAll(m.Ctx, node, wire.LogsRequest{Module: module})
	return r.Lines, err
}

// texts are the lines of stream s ("" every stream), as "stream: text".
func texts(lines []wire.LogLine, s wire.LogStream) []string {
	var out []string
	for _, l := range lines {
		if s == "" || l.Stream == s {
			out = append(out, string(l.Stream)+": "+l.Text)
		}
	}
	return out
}

// runs assigns box a module whose program is script (sh -c), pushes, and
// waits for the apply and the program's start: the agent reports the
// apply before its supervisor starts the program, and a program has a
// log from its first start (asked before, the agent says it runs none:
// TestAProgramsOutputIsItsLogInOrder failed so once in ten loaded runs).
func (m *mesh) runs(module, script string) {
	m.T.Helper()
	m.WriteModule(`{"module":"` + module + `","run":{"command":"/bin/sh","args":["-c",` + strconv.Quote(script) + `]}}`)
	m.Assign("box", module, nil)
	m.Report("box", m.Push("box").Sent[0].Digest)
	eventually(m.T, module+"'s program to have a log", func() bool {
		_, err := m.logs("box", module)
		return err == nil
	})
}

// A program's stdout and stderr are its log, each line with its stream, in
// the order it wrote them: the program writes each line only once the one
// before is in the log on disk, so the order is the program's, not a
// race's. Fails when stdout is dropped (as it was), when a stream is
// mislabelled, or when lines come out of order.
func TestAProgramsOutputIsItsLogInOrder(t *testing.T) {
	m := newMesh(t)
	m.Enroll("box")
	root := filepath.Join(t.TempDir(), "root")
	m.AgentWith("box", root, fast)
	// Each line waits for the one before in the log the agent keeps
	// under its state directory (beside the root).
	m.runs("talk", `L="$MESH_ROOT.state/logs/talk.log"
		seen() { until grep -q "$1" "$L" 2>/dev/null; do sleep 0.01; done; }
		echo out-1; seen out-1
		echo err-1 >&2; seen err-1
		printf 'out-2\nout-3 unfinished'; seen out-2
		echo err-2 >&2; seen err-2
		exec sleep 600`)
	var lines []wire.LogLine
	eventually(t, "the program's four lines", func() bool {
		var err error
		lines, err = m.logs("box", "talk")
		return err == nil && len(lines) >= 4
	})
	want := []string{"stdout: out-1", "stderr: err-1", "stdout: out-2", "stderr: err-2"}
	if got := texts(lines, ""); !slices.Equal(got, want) {
		t.Fatalf("the log is\n%s\nnot\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, l := range lines {
		if l.Time.IsZero() {
			t.Fatalf("a line without its time: %+v", l)
		}
	}
}

// The bound keeps the newest lines and drops the oldest, in memory and on
// disk; a log longer than one answer is read whole in pieces; a program
// that cannot start says why in its log; a module the node does not run is
// refused with its kind. Fails when the bound keeps the oldest, lets the
// log grow past it (on disk, twice it), or loses a line between pieces.
func TestAProgramsLogKeepsItsNewestLinesWithinItsBound(t *testing.T) {
	m := newMesh(t)
	m.Enroll("box")
	root := filepath.Join(t.TempDir(), "root")
	const bound = 64 << 10
	m.AgentWith("box", root, func(c *agent.Config) { fast(c); c.LogBytes = bound })
	// About 60 bytes a line as stored: some 70,000 lines are over 4 MB,
	// many times the bound, and what is kept is over one answer.
	m.runs("counter", `seq 1 70000; exec sleep 600`)
	var lines []wire.LogLine
	eventually(t, "the last line", func() bool {
		var err error
		lines, err = m.logs("box", "counter")
		return err == nil && len(lines) > 0 && lines[len(lines)-1].Text == "70000"
	})
	// Read again once it wrote its last: read while it wrote, the bound
	// may drop lines between pieces (LogsReply.Dropped says how many).
	lines, err := m.logs("box", "counter")
	m.Must(err)
	first, err := strconv.Atoi(lines[0].Text)
	m.Must(err)
	if first == 1 || len(lines) < 500 {
		t.Fatalf("kept %d lines from %d: the bound kept the oldest, or too few", len(lines), first)
	}
	for i, l := range lines {
		if l.Text != strconv.Itoa(first+i) {
			t.Fatalf("line %d of the log is %q, not %d: a line was lost between pieces", i, l.Text, first+i)
		}
	}
	if stored := len(lines) * len(`{"n":70000,"time":"2026-12-04T21:00:00.123456789Z","stream":"stdout","text":"70000"}`); stored > 2*bound {
		t.Fatalf("%d lines kept in memory with a bound of %d bytes", len(lines), bound)
	}
	onDisk := 0
	entries, err := os.ReadDir(filepath.Join(root+".state", "logs"))
	m.Must(err)
	for _, e := range entries {
		info, err := e.Info()
		m.Must(err)
		onDisk += int(info.Size())
	}
	if onDisk > 2*bound {
		t.Fatalf("the log takes %d bytes on disk, over twice its bound of %d", onDisk, bound)
	}

	// A program that cannot start: its log says why.
	m.WriteModule(`{"module":"missing","run":{"command":"no-such-program-anywhere"}}`)
	m.Assign("box", "missing", nil)
	m.Report("box", m.Push("box").Sent[0].Digest)
	eventually(t, "the failed start in its log", func() bool {
		lines, err := m.logs("box", "missing")
		return err == nil && len(lines) > 0 && lines[0].Stream == wire.LogAgent &&
			strings.Contains(lines[0].Text, `cannot start: exec: "no-such-program-anywhere": executable file not found`)
	})

	// A module the node does not run: refused, of its kind.
	_, err = m.logs("box", "nothing")
	var re *client.RemoteError
	if !errors.As(err, &re) || !errors.Is(err, aggregates.ErrUnknownModule) || !strings.Contains(err.Error(), "box runs no program of nothing") {
		t.Fatalf("the log of a module box does not run: %v", err)
	}
}

// A restarted agent serves what its programs wrote before it stopped, and
// the log goes on after it; a module that leaves takes its log with it.
// Fails when the log lives only in the agent's memory, or outlives its
// module on disk.
func TestAProgramsLogOutlivesItsAgent(t *testing.T) {
	m := newMesh(t)
	m.Enroll("box")
	root := filepath.Join(t.TempDir(), "root")
	stop := m.AgentWith("box", root, fast)
	m.runs("talk", `echo "started $$"; exec sleep 600`)
	started := func() []string {
		lines, err := m.logs("box", "talk")
		if err != nil {
			// An agent just started may not hear its logs' subject yet
			// (no responders): asked again, not failed (a CI run failed
			// here once).
			return nil
		}
		var out []string
		for _, l := range lines {
			if strings.HasPrefix(l.Text, "started ") {
				out = append(out, l.Text)
			}
		}
		return out
	}
	eventually(t, "the first start's line", func() bool { return len(started()) == 1 })
	stop()
	stop = m.AgentWith("box", root, fast)
	defer stop()
	eventually(t, "the second start's line", func() bool { return len(started()) == 2 })
	lines, err := m.logs("box", "talk")
	m.Must(err)
	if got := texts(lines, wire.LogAgent); !slices.Contains(got, "agent: stopped: the agent stopped") {
		t.Fatalf("the agent's stop is not in the log: %v", got)
	}

	_, err = m.H.Nodes.Unassign(m.Ctx, wire.UnassignRequest{CommandID: wire.NewCommandID(), Node: "box", Module: "talk"})
	m.Must(err)
	m.Report("box", m.Push("box").Sent[0].Digest)
	eventually(t, "the log to go with its module", func() bool {
		_, err := m.logs("box", "talk")
		return errors.Is(err, aggregates.ErrUnknownModule)
	})
	if entries, err := os.ReadDir(filepath.Join(root+".state", "logs")); err != nil || len(entries) != 0 {
		t.Fatalf("the logs directory after the module left: %v %v", entries, err)
	}
}

// A line longer than a log keeps whole (wire.MaxLogLine) is kept in
// pieces, nothing of it lost; a line of exactly the most is one line, and
// an unfinished last line is kept when the program exits. Fails when a
// long line is dropped or held back, or an exact one gains an empty line.
func TestALongLineIsKeptInPieces(t *testing.T) {
	m := newMesh(t)
	m.Enroll("box")
	m.AgentWith("box", filepath.Join(t.TempDir(), "root"), fast)
	m.runs("long", `head -c 10000 /dev/zero | tr '\0' x; echo; head -c 4096 /dev/zero | tr '\0' y; echo; printf unfinished; exit 3`)
	var lines []wire.LogLine
	eventually(t, "the long lines", func() bool {
		var err error
		lines, err = m.logs("box", "long")
		return err == nil && len(lines) >= 5
	})
	var got []string
	for _, l := range lines {
		got = append(got, fmt.Sprintf("%d%.1s", len(l.Text), l.Text))
	}
	if want := []string{"4096x", "4096x", "1808x", "4096y", "10u"}; !slices.Equal(got[:5], want) {
		t.Fatalf("the lines' lengths and letters: %v, not %v", got, want)
	}
}
