package agent_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meshctl/mesh/agent"
	"github.com/meshctl/mesh/artifact"
	"github.com/meshctl/mesh/declaration"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/wire"
	"github.com/nats-io/nats.go/jetstream"
)

// tool is a program as an artifact: it writes its pid and its build to
// starts in its working directory each time it starts, then sleeps.
func tool(build string) []byte {
	return []byte("#!/bin/sh\necho $$ " + build + " >> starts\nexec sleep 600\n")
}

// A module whose program is an artifact it installs (issue 32, points 2, 3
// and 5).
const toolModule = `{"module":"svc","resources":[{"kind":"directory","path":"/srv","mode":"0755"},
    {"kind":"artifact","path":"/srv/tool","mode":"0755","artifact":"tool"}],
  "run":{"command":"/srv/tool","dir":"/srv"}}`

// An artifact travels as its digest and size in the signed declaration;
// the agent fetches it, writes exactly those bytes with the declared mode,
// runs it, keeps it in its cache (a re-apply fetches nothing: the bucket
// could lose it), and a new build of it, registered and pushed, restarts
// the program once. Fails when the bytes or the mode are not the
// artifact's, when a re-apply fetches, or when a new build does not
// restart the program exactly once.
func TestAnArtifactIsFetchedVerifiedCachedAndRun(t *testing.T) {
	t.Parallel()
	m := newMesh(t)
	m.Enroll("box")
	root := filepath.Join(t.TempDir(), "root")
	m.AgentWith("box", root, fast)
	first := m.PutArtifact("tool", tool("one"))
	m.WriteModule(toolModule)
	m.Assign("box", "svc", nil)
	sent := m.Push("box").Sent[0]
	m.ReportWhere("box", sent.Digest, events.OutcomeApplied)
	d := lastDeclaration(t, m, "box")
	if r := d.Resources[1]; r.Kind != "artifact" || r.Digest != first || r.Size != int64(len(tool("one"))) || r.Artifact != "tool" {
		t.Fatalf("the declaration carries the artifact as %+v, not its digest %s and size", r, first)
	}
	if d.Runs[0].Digest != first {
		t.Fatalf("the declaration's program is %+v, not artifact %s", d.Runs[0], first)
	}
	written := filepath.Join(root, "srv/tool")
	if b, err := os.ReadFile(written); err != nil || !bytes.Equal(b, tool("one")) {
		t.Fatalf("the artifact under the root: %q %v", b, err)
	}
	if info, _ := os.Stat(written); info.Mode().Perm() != 0o755 {
		t.Fatalf("the artifact's mode is %v, not 0755", info.Mode().Perm())
	}
	eventually(t, "the artifact's program to start", func() bool { return strings.Contains(starts(t, root), "one") })
	eventually(t, "status to say which digest it runs", func() bool { return m.runtimeState("box", "svc").Digest == first })

	// A re-apply fetches nothing: the bucket loses the object behind the
	// mesh's back, and a new declaration installing it still applies.
	obs, err := artifact.Bucket(m.Ctx, m.H.Core.Store.JetStream())
	m.Must(err)
	m.Must(obs.Delete(m.Ctx, first))
	_, err = m.H.Push.Declare(m.Ctx, wire.DeclareRequest{CommandID: wire.NewCommandID(), Node: "box", File: "again.json",
		Body: `{"resources":[{"kind":"directory","path":"/srv","mode":"0755"},{"kind":"file","path":"/srv/extra","mode":"0644","content":"x"},` +
			`{"kind":"artifact","path":"/srv/tool","mode":"0755","artifact":"tool","digest":"` + first + `"}]}`})
	m.Must(err)
	last := lastDeclarationEvent(t, m, "box")
	m.ReportWhere("box", last.Digest, events.OutcomeApplied)

	// A new build of the program: put under the same name, registered (the
	// manifest unchanged, the digest in it new), assigned, pushed: the
	// program starts again, once.
	second := m.PutArtifact("tool", tool("two"))
	m.WriteModule(toolModule)
	m.Assign("box", "svc", nil)
	m.ReportWhere("box", m.Push("box").Sent[0].Digest, events.OutcomeApplied)
	eventually(t, "the new build to start", func() bool { return strings.Contains(starts(t, root), "two") })
	eventually(t, "status to say the new digest", func() bool { return m.runtimeState("box", "svc").Digest == second })
	if n := strings.Count(starts(t, root), "\n"); n != 2 {
		t.Fatalf("the program started %d times, not twice (once a build):\n%s", n, starts(t, root))
	}
	if b, _ := os.ReadFile(written); !bytes.Equal(b, tool("two")) {
		t.Fatalf("after the new build the root holds %q", b)
	}
}

// Bytes in the bucket that are not the signed digest's (the object
// replaced behind the mesh's back) make the declaration refused, naming
// both digests, and nothing of it is written. Fails when a file is
// written, or the refusal names neither digest.
func TestAnArtifactWhoseBytesAreNotItsDigestIsRefused(t *testing.T) {
	t.Parallel()
	m := newMesh(t)
	m.Enroll("box")
	root := filepath.Join(t.TempDir(), "root")
	m.AgentWith("box", root, fast)
	good := tool("one")
	digest := m.PutArtifact("tool", good)
	evil := bytes.ToUpper(good) // as long, other bytes
	obs, err := artifact.Bucket(m.Ctx, m.H.Core.Store.JetStream())
	m.Must(err)
	_, err = obs.Put(m.Ctx, jetstream.ObjectMeta{Name: digest}, bytes.NewReader(evil))
	m.Must(err)
	m.WriteModule(toolModule)
	m.Assign("box", "svc", nil)
	sent := m.Push("box").Sent[0]
	r := m.ReportWhere("box", sent.Digest, events.OutcomeRefused)
	got, _, _ := artifact.Hash(bytes.NewReader(evil))
	if !strings.Contains(r.Reason, digest) || !strings.Contains(r.Reason, got) {
		t.Fatalf("the refusal says %q, not both digests (%s, %s)", r.Reason, digest, got)
	}
	if _, err := os.Stat(filepath.Join(root, "srv")); !os.IsNotExist(err) {
		t.Fatalf("a refused declaration wrote /srv under the root: %v", err)
	}
	if entries, _ := os.ReadDir(filepath.Join(root+".state", "artifacts")); len(entries) != 0 {
		t.Fatalf("the refused bytes stayed in the agent's cache: %v", entries)
	}
}

// starts is what the tool wrote, one line a start.
func starts(t *testing.T, root string) string {
	t.Helper()
	b, _ := os.ReadFile(filepath.Join(root, "srv/starts"))
	return string(b)
}

// lastDeclarationEvent is the last declaration sent to node, from the log.
func lastDeclarationEvent(t *testing.T, m *mesh, node string) events.DeclarationSent {
	t.Helper()
	msg, found, err := m.H.Core.Store.Last(m.Ctx, events.DeclarationSubject(node))
	if err != nil || !found {
		t.Fatalf("no declaration sent to %s: %v", node, err)
	}
	_, ev, err := events.Decode(msg.Data)
	m.Must(err)
	return ev.(events.DeclarationSent)
}

// lastDeclaration is what the last declaration sent to node says.
func lastDeclaration(t *testing.T, m *mesh, node string) declaration.Declaration {
	t.Helper()
	var d declaration.Declaration
	m.Must(json.Unmarshal(lastDeclarationEvent(t, m, node).Declaration, &d))
	return d
}

// The cache keeps what the applied declaration installs and lets the
// rest go past its bound, least recently used first. Fails when a digest
// no longer installed stays past the bound, or the one installed goes.
func TestTheArtifactCacheIsBounded(t *testing.T) {
	t.Parallel()
	m := newMesh(t)
	m.Enroll("box")
	root := filepath.Join(t.TempDir(), "root")
	m.AgentWith("box", root, func(c *agent.Config) { c.ArtifactCacheBytes = 1 })
	const files = `{"module":"files","resources":[{"kind":"artifact","path":"/opt/a","mode":"0644","artifact":"a"}]}`
	first := m.PutArtifact("a", []byte("first bytes"))
	m.WriteModule(files)
	m.Assign("box", "files", nil)
	m.ReportWhere("box", m.Push("box").Sent[0].Digest, events.OutcomeApplied)
	second := m.PutArtifact("a", []byte("second bytes"))
	m.WriteModule(files)
	m.Assign("box", "files", nil)
	m.ReportWhere("box", m.Push("box").Sent[0].Digest, events.OutcomeApplied)
	cache := filepath.Join(root+".state", "artifacts")
	if _, err := os.Stat(filepath.Join(cache, second)); err != nil {
		t.Fatalf("the digest the applied declaration installs left the cache: %v", err)
	}
	// The cache is trimmed just after the apply's report is sent.
	eventually(t, "a digest no longer installed to leave the cache past its bound", func() bool {
		_, err := os.Stat(filepath.Join(cache, first))
		return os.IsNotExist(err)
	})
}
