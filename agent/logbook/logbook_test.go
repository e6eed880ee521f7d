package logbook

import (
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/meshctl/mesh/wire"
)

// A module's log keeps its newest lines within its bound, in order, and a
// book opened again on the same state (a restarted agent) serves them as
// they were; a module no longer kept is dropped.
func TestABookKeepsTheNewestLinesAndOutlivesARestart(t *testing.T) {
	state := t.TempDir()
	at := time.Date(2026, 12, 5, 7, 0, 0, 0, time.UTC)
	now := func() time.Time { at = at.Add(time.Second); return at }
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	b := New(state, MinBytes, now, quiet)
	lg := b.Of("greeter")
	for i := range 2000 {
		lg.Add(wire.LogStdout, fmt.Sprintf("line %04d of the greeter's output", i))
	}
	first, _ := lg.Read(wire.LogsRequest{Module: "greeter"})
	n := len(first.Lines)
	if n == 0 || n == 2000 || first.Lines[n-1].Text != "line 1999 of the greeter's output" {
		t.Fatalf("kept %d lines, the last %+v: want the newest within %d bytes", n, first.Lines[n-1:], MinBytes)
	}
	for i := 1; i < n; i++ {
		if !first.Lines[i-1].Time.Before(first.Lines[i].Time) {
			t.Fatalf("lines out of order at %d: %+v", i, first.Lines[i-1:i+1])
		}
	}

	// The agent killed here: nothing closes the book.
	again := New(state, MinBytes, now, quiet)
	if !again.Has("greeter") {
		t.Fatal("a book opened again on the same state does not have the greeter's log")
	}
	second, _ := again.Of("greeter").Read(wire.LogsRequest{Module: "greeter"})
	if len(second.Lines) != n || second.Lines[n-1] != first.Lines[n-1] || second.Lines[0] != first.Lines[0] {
		t.Fatalf("after a restart: %d lines, want the %d kept", len(second.Lines), n)
	}
	again.KeepOnly(map[string]bool{})
	if again.Has("greeter") {
		t.Fatal("a module no longer kept still has its log")
	}
}
