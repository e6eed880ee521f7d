package agent

import (
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/meshctl/mesh/compose"
)

// A program file still open for writing somewhere (a child forked while
// the agent wrote it) is busy: its start is tried again, and starts once
// the writer lets go, rather than failing its first start.
func TestABusyProgramIsStartedOnceItIsFree(t *testing.T) {
	root := t.TempDir()
	path := filepath.Join(root, "prog")
	w, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := w.WriteString("#!/bin/sh\nexit 0\n"); err != nil {
		t.Fatal(err)
	}
	tries := 0
	v := &supervisor{root: root, env: func(string) ([]string, string, error) { return nil, "", nil },
		busy: func() {
			// The write end goes at the first retry, as a forked child's
			// does when it execs.
			tries++
			w.Close()
		}}
	// A digest: the command is a path under the root, as an artifact's is.
	cmd, err := v.start(compose.Runtime{Module: "m", Command: "/prog", Digest: "d"}, io.Discard, io.Discard)
	if err != nil {
		t.Fatalf("a program busy for a moment did not start: %v", err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	if tries != 1 {
		t.Fatalf("tried again %d time(s), want 1: the first start should have found the program busy", tries)
	}
}
