package agent_test

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/meshctl/mesh/agent"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/events/store"
	"github.com/nats-io/nats.go"
)

// Rule 21: a secret setting and a minted credential reach the files of the
// nodes that need them, and no message of the stream holds either in
// clear. Fails when the setting is not sealed in the log, when a file that
// read a secret is sent in clear, or when the two ends mint differently.
func TestSecretsReachTheirFilesAndNeverTheStream(t *testing.T) {
	t.Parallel()
	m := newMesh(t)
	dbRoot, appRoot, _ := m.dbAndApp()
	const pw = "hunter2-very-secret"
	m.Assign("db-1", "postgres", map[string]string{"password": pw})
	m.Assign("app-1", "app", nil)
	r := m.Push("")
	if len(r.Sent) != 2 {
		t.Fatalf("push: %+v", r)
	}
	for _, s := range r.Sent {
		if rep := m.Report(s.Node, s.Digest); rep.Outcome != "applied" {
			t.Fatalf("%s: %+v", s.Node, rep)
		}
	}
	users, err := os.ReadFile(filepath.Join(dbRoot, "etc/postgres/users.conf"))
	m.Must(err)
	cred, err := os.ReadFile(filepath.Join(appRoot, "etc/app/database.secret"))
	m.Must(err)
	if !strings.Contains(string(users), "postgres "+pw) {
		t.Fatalf("users.conf lacks the secret setting: %q", users)
	}
	// The consumer's minted password is the one the provider lists for it.
	var minted string
	for _, l := range strings.Split(string(cred), "\n") {
		if p, ok := strings.CutPrefix(l, "password = "); ok {
			minted = p
		}
	}
	if len(minted) != 32 || !strings.Contains(string(users), "app_app_1 "+minted) {
		t.Fatalf("the two ends disagree: app-1 holds %q, db-1 lists %q", cred, users)
	}
	var held [][]byte
	err = m.H.Core.Store.Read(m.Ctx, store.ReadOptions{}, func(msg store.Msg) error {
		held = append(held, msg.Data)
		// A declaration travels base64 inside its event: scan its bytes too.
		if _, ev, err := events.DecodeFromSubject(msg.Subject, msg.Data); err == nil {
			if d, ok := ev.(events.DeclarationSent); ok {
				held = append(held, d.Declaration)
			}
		}
		return nil
	})
	m.Must(err)
	if len(held) == 0 {
		t.Fatal("read nothing from the stream")
	}
	for _, data := range held {
		for _, s := range []string{pw, minted} {
			if bytes.Contains(data, []byte(s)) {
				t.Fatalf("the stream holds a secret in clear: %s", data)
			}
		}
	}
}

// Issue 29 point 6: a file that printed a secret setting opens only with a
// content key the controller gives at apply. An agent that finds its
// declaration while no controller answers applies nothing and reports
// nothing (a file it cannot open yet is not a failure), and applies it
// once a controller answers. Fails when the agent reports the declaration
// failed (it then never applies it: a declaration is never applied twice)
// or writes the file without its secret.
func TestAnAgentWaitsForTheKeyOfASecretFile(t *testing.T) {
	t.Parallel()
	m := newMesh(t)
	m.Enroll("db-1", "linux")
	m.Register("postgres.json")
	const pw = "wait-for-my-key"
	m.Assign("db-1", "postgres", map[string]string{"password": pw})
	root := filepath.Join(t.TempDir(), "root")
	// Enrolled while the controller is there; stopped before the push
	// lands on it, so that it finds the declaration with no controller.
	m.AgentAt("db-1", root)()
	sent := m.Push("db-1").Sent[0]
	m.Ctrl.Close()
	// It starts from what it enrolled: no token, no controller asked.
	j, err := agent.Enrol(m.Ctx, agent.Join{Mesh: m.H.Core.Mesh, Bus: m.Srv.ClientURL(), Node: "db-1", Key: m.H.Core.PublicKey}, agent.StateDir(root, ""),
		func(o ...nats.Option) (*nats.Conn, error) { return nats.Connect(m.Srv.ClientURL(), o...) }, slog.New(slog.DiscardHandler))
	m.Must(err)
	following := make(chan struct{})
	var once sync.Once
	stop := m.AgentJoined(j, root, func(c *agent.Config) {
		c.Observe = func(o agent.Observation) {
			if o.Following {
				once.Do(func() { close(following) })
			}
		}
	})
	defer stop()
	// It read its declaration and follows, waiting for the key: Run did
	// not end on a key nobody gave.
	eventually(t, "the agent to follow its subject with no controller", func() bool {
		select {
		case <-following:
			return true
		default:
			return false
		}
	})
	// A second controller with the mesh's key answers from now on.
	m.H = m.controller(-1)
	if rep := m.Report("db-1", sent.Digest); rep.Outcome != events.OutcomeApplied {
		t.Fatalf("db-1's first report on the declaration whose key it waited for: %+v", rep)
	}
	users, err := os.ReadFile(filepath.Join(root, "etc/postgres/users.conf"))
	m.Must(err)
	if !strings.Contains(string(users), "postgres "+pw) {
		t.Fatalf("users.conf: %q", users)
	}
}
