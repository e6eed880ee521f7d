package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meshctl/mesh/artifact"
)

// A module installing artifact tool, whose program it is.
const toolManifest = `{"module":"svc","resources":[{"kind":"artifact","path":"/opt/tool","mode":"0755","artifact":"tool"}],
  "run":{"command":"/opt/tool"}}`

// The artifact verbs as an operator uses them, bad input included, and
// their --json against golden files (issue 32): a put says what it stored
// (and "nothing to do" the second time); a name that cannot be one, or a
// file over the mesh's bound, is refused in one sentence naming the remedy
// (the bound and the size), and nothing is recorded; a removal is refused
// while a node's last declaration installs it; plan shows a new build of
// it as old and new digests and sizes; and a backup carries the bytes,
// which a restore brings back into the bus. -update rewrites the golden
// files (go test ./cmd/mesh -run TestJSONOfTheWritesMatchTheirGoldenFiles -update).
func TestJSONOfTheWritesMatchTheirGoldenFilesForArtifacts(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	start(t, "ready", "--home", home, "up", "--listen", freeAddr(t), "--artifact-max-mib", "1")
	dir := t.TempDir()
	one := filepath.Join(dir, "tool")
	if err := os.WriteFile(one, bytes.Repeat([]byte("#!/bin/sh\n"), 20_000), 0o755); err != nil {
		t.Fatal(err)
	}
	first, _, _ := artifact.HashFile(one)
	r := mustRun(t, home, "artifact", "put", one, "--json")
	matchGolden(t, "artifact-put", []string{"artifact", "put", "FILE", "--json"}, r.out)
	if r := mustRun(t, home, "artifact", "put", one); !strings.Contains(r.out, "nothing to do") {
		t.Fatalf("a second put of the same bytes says %q", r.out)
	}
	// Bad input: refused in one sentence, nothing recorded.
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, make([]byte, 1<<20+1), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := mesh(t, home, "artifact", "put", big); r.code == 0 || !strings.Contains(r.err, "1048577 bytes, over the mesh's bound of 1048576 bytes") || strings.Count(strings.TrimSpace(r.err), "\n") != 0 {
		t.Fatalf("a put over the bound: %+v", r)
	}
	odd := filepath.Join(dir, "tool.sh")
	if err := os.WriteFile(odd, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := mesh(t, home, "artifact", "put", odd); r.code != 2 || !strings.Contains(r.err, "--name") {
		t.Fatalf("a put whose file's name is no artifact name: %+v", r)
	}
	var list struct{ Artifacts []struct{ Name string } }
	if err := json.Unmarshal([]byte(mustRun(t, home, "artifact", "list", "--json").out), &list); err != nil || len(list.Artifacts) != 1 {
		t.Fatalf("after the refusals the list holds %+v (%v), not tool alone", list, err)
	}

	// A manifest naming an artifact the mesh does not hold is refused at
	// registration, naming it and the remedy; nothing is registered.
	nope := filepath.Join(dir, "nope.json")
	if err := writeFile(nope, strings.ReplaceAll(toolManifest, `"artifact":"tool"`, `"artifact":"nope"`)); err != nil {
		t.Fatal(err)
	}
	if r := mesh(t, home, "module", "register", nope); r.code != 1 || !strings.Contains(r.err, "mesh artifact put FILE --name nope") {
		t.Fatalf("registering a module whose artifact the mesh does not hold: %+v", r)
	}

	// Installed by a module on a node: its removal is refused.
	mf := filepath.Join(dir, "svc.json")
	if err := writeFile(mf, toolManifest); err != nil {
		t.Fatal(err)
	}
	mustRun(t, home, "node", "enroll", "n-1")
	mustRun(t, home, "module", "register", mf)
	mustRun(t, home, "assign", "n-1", "svc")
	mustRun(t, home, "push", "n-1")
	if r := mesh(t, home, "artifact", "rm", "tool"); r.code != 1 || !strings.Contains(r.err, "n-1") {
		t.Fatalf("removing an artifact n-1's declaration installs: %+v", r)
	}
	matchGolden(t, "artifact-show", []string{"artifact", "show", "tool", "--json"}, mustRun(t, home, "artifact", "show", "tool", "--json").out)
	matchGolden(t, "artifact-list", []string{"artifact", "list", "--json"}, mustRun(t, home, "artifact", "list", "--json").out)

	// A new build of it: registering the same manifest takes the new
	// digest, and plan shows both digests and sizes.
	if err := os.WriteFile(one, []byte("#!/bin/sh\necho two\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	second, _, _ := artifact.HashFile(one)
	mustRun(t, home, "artifact", "put", one)
	if r := mustRun(t, home, "module", "register", mf); !strings.Contains(r.out, "svc") {
		t.Fatalf("registering svc again after a new put: %q", r.out)
	}
	mustRun(t, home, "assign", "n-1", "svc")
	plan := mustRun(t, home, "plan", "n-1").out
	if !strings.Contains(plan, "artifact tool sha256 "+first+" (200000 bytes) -> artifact tool sha256 "+second+" (19 bytes)") {
		t.Fatalf("plan does not show the artifact's old and new digests and sizes:\n%s", plan)
	}

	// The backup holds both digests' bytes; a restore puts them into the
	// bus of a new home, where a put of the same file uploads nothing.
	backup := filepath.Join(t.TempDir(), "backup")
	if r := mustRun(t, home, "backup", backup); !strings.Contains(r.out, "2 artifact(s)") {
		t.Fatalf("the backup says %q", r.out)
	}
	for _, d := range []string{first, second} {
		if got, _, err := artifact.HashFile(filepath.Join(backup, "artifacts", d)); err != nil || got != d {
			t.Fatalf("the backup's artifact %s: %s %v", d, got, err)
		}
	}
	mustRun(t, home, "unassign", "n-1", "svc")
	mustRun(t, home, "push", "n-1")
	matchGolden(t, "artifact-rm", []string{"artifact", "rm", "tool", "--json"}, mustRun(t, home, "artifact", "rm", "tool", "--json").out)
	if r := mesh(t, home, "artifact", "rm", "tool"); r.code != 1 || !strings.Contains(r.err, "no artifact is stored under that name") {
		t.Fatalf("removing it twice: %+v", r)
	}
	restored := t.TempDir()
	if r := mustRun(t, restored, "restore", backup); !strings.Contains(r.out, "restored the bytes of 2 artifact(s)") {
		t.Fatalf("the restore says %q", r.out)
	}
	start(t, "ready", "--home", restored, "up", "--listen", freeAddr(t))
	var put struct{ Upload, Changed bool }
	if err := json.Unmarshal([]byte(mustRun(t, restored, "artifact", "put", one, "--json").out), &put); err != nil || put.Upload || put.Changed {
		t.Fatalf("the restored mesh does not hold tool's bytes as its log says: %+v %v", put, err)
	}
}
