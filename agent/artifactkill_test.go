package agent_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/meshctl/mesh/agent"
	"github.com/meshctl/mesh/events"
	"github.com/nats-io/nats.go"
)

// killedFetch is what the test hands the agent it kills: its join (the
// token's, the keys in the state directory), its root, and after how
// many bytes of the artifact its fetch stops, to be killed.
type killedFetch struct {
	Join  agent.Join `json:"join"`
	Root  string     `json:"root"`
	After int64      `json:"after"`
}

const killedFetchEnv = "MESH_KILLED_FETCH"

// Issue 32, point 2: an agent killed (SIGKILL, in a process of its own)
// in the middle of fetching a large artifact, its chunks part written,
// leaves the file it would replace byte for byte as it was and nothing
// beside it, and no bytes in its cache under the digest; started again on
// the same root and state, it fetches again, checks, writes the right
// bytes and reports applied, and the cut fetch's temporary file is gone.
// Fails when the kill leaves a partial file at the path or in the cache
// under the digest, when the new agent trusts the cut bytes, or when the
// temporary file stays.
func TestAnAgentKilledMidFetchLeavesNoPartialArtifact(t *testing.T) {
	if spec := os.Getenv(killedFetchEnv); spec != "" {
		runKilledFetchAgent(t, spec)
		return
	}
	t.Parallel()
	m := newMesh(t)
	m.Enroll("box")
	root := filepath.Join(t.TempDir(), "root")
	token, err := m.H.Access.LocalToken(m.Ctx, "box")
	m.Must(err)
	unenrolled := agent.Join{Mesh: m.H.Core.Mesh, Bus: m.Srv.ClientURL(), Node: "box", Key: m.H.Core.PublicKey, Token: token}
	j, err := agent.Enrol(m.Ctx, unenrolled, agent.StateDir(root, ""), func(o ...nats.Option) (*nats.Conn, error) {
		return nats.Connect(m.Srv.ClientURL(), o...)
	}, slog.New(slog.DiscardHandler))
	m.Must(err)

	// The old bytes, applied by an agent that then stops.
	const files = `{"module":"files","resources":[{"kind":"artifact","path":"/opt/a","mode":"0755","artifact":"a"}]}`
	old := []byte("#!/bin/sh\necho old\n")
	oldDigest := m.PutArtifact("a", old)
	m.WriteModule(files)
	m.Assign("box", "files", nil)
	stop := m.AgentJoined(j, root, fast)
	m.ReportWhere("box", m.Push("box").Sent[0].Digest, events.OutcomeApplied)
	stop()

	// The new bytes: many chunks of the object store's (128 KiB each).
	large := make([]byte, 4<<20)
	rand.Read(large)
	newDigest := m.PutArtifact("a", large)
	m.WriteModule(files)
	m.Assign("box", "files", nil)
	sent := m.Push("box").Sent[0]

	// The agent in a process of its own stops its fetch past the first
	// chunk, says so, and is killed there: no deferred removal runs.
	spec, _ := json.Marshal(killedFetch{Join: unenrolled, Root: root, After: 200 << 10})
	cmd := exec.Command(os.Args[0], "-test.run", "^TestAnAgentKilledMidFetchLeavesNoPartialArtifact$")
	cmd.Env = append(os.Environ(), killedFetchEnv+"="+string(spec))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	m.Must(err)
	m.Must(cmd.Start())
	lines := bufio.NewScanner(out)
	var cut string
	for lines.Scan() {
		if cut = lines.Text(); strings.HasPrefix(cut, "cut ") {
			break
		}
	}
	m.Must(cmd.Process.Kill())
	_ = cmd.Wait()
	if !strings.HasPrefix(cut, "cut ") {
		t.Fatalf("the agent to kill never began fetching the artifact (last said %q):\n%s", cut, stderr.String())
	}

	written := filepath.Join(root, "opt", "a")
	onlyA := func(when string) {
		t.Helper()
		entries, err := os.ReadDir(filepath.Join(root, "opt"))
		m.Must(err)
		if len(entries) != 1 || entries[0].Name() != "a" {
			t.Fatalf("%s, /opt holds %v, not the artifact alone", when, entries)
		}
	}
	if b, err := os.ReadFile(written); err != nil || !bytes.Equal(b, old) {
		t.Fatalf("after the kill (%s) /opt/a holds %d bytes (%v), not the old %d", cut, len(b), err, len(old))
	}
	onlyA("after the kill")
	cache := filepath.Join(root+".state", "artifacts")
	names := func() (out []string) {
		entries, err := os.ReadDir(cache)
		m.Must(err)
		for _, e := range entries {
			out = append(out, e.Name())
		}
		return out
	}
	if slices.Contains(names(), newDigest) {
		t.Fatalf("after the kill the cache holds the new digest's cut bytes under its name: %v", names())
	}
	var temporary []string
	for _, n := range names() {
		if strings.HasPrefix(n, ".") {
			temporary = append(temporary, n)
		}
	}
	if len(temporary) != 1 {
		t.Fatalf("the kill was not in the middle of a fetch: the cache holds %v, not one temporary file", names())
	}

	// A fresh agent on the same root and state.
	m.AgentJoined(j, root, fast)
	m.ReportWhere("box", sent.Digest, events.OutcomeApplied)
	if b, err := os.ReadFile(written); err != nil || !bytes.Equal(b, large) {
		t.Fatalf("after the fresh agent /opt/a holds %d bytes (%v), not the new %d", len(b), err, len(large))
	}
	onlyA("after the fresh agent")
	got := names()
	slices.Sort(got)
	want := []string{newDigest, oldDigest}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("the cache holds %v, not the two digests alone (the cut fetch's %v gone)", got, temporary)
	}
}

// runKilledFetchAgent is the agent the test kills: it follows its node,
// and its first fetch that gets past spec's After bytes says so and waits
// there for the kill.
func runKilledFetchAgent(t *testing.T, spec string) {
	var k killedFetch
	if err := json.Unmarshal([]byte(spec), &k); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	dial := func(o ...nats.Option) (*nats.Conn, error) { return nats.Connect(k.Join.Bus, o...) }
	j, err := agent.Enrol(ctx, k.Join, agent.StateDir(k.Root, ""), dial, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	nc, err := dial()
	if err != nil {
		t.Fatal(err)
	}
	held := make(chan struct{}) // never closed: the kill ends the wait
	a, err := agent.Open(ctx, nc, agent.Config{Join: j, Root: k.Root, Fetching: func(digest string, written int64) {
		if written >= k.After {
			fmt.Printf("cut %s at %d bytes\n", digest, written)
			<-held
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Run(ctx); err != nil {
		t.Fatal(err)
	}
}
