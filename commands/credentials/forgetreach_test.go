package credentials_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshctl/mesh/agent"
	"github.com/meshctl/mesh/agent/agenttest"
	"github.com/meshctl/mesh/commands/commandstest"
	"github.com/meshctl/mesh/commands/secrets"
	"github.com/meshctl/mesh/declaration"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/secret"
	"github.com/meshctl/mesh/wire"
	"github.com/nats-io/nkeys"
)

// Issue 29, point 6: after mesh secret forget, no key anywhere opens the
// value from a declaration sent before it, the node's own included. The
// attack: hold every key there is (the node's seed, what its machine keeps;
// the controller key, what the operator's home keeps) and the log, and open
// users.conf from the declaration the node applied. Before the forget those
// keys open only the outer box; the inner one needs a content key the
// controller makes from the setting's salt and gives the node at apply.
// After the forget the salt is gone from the bus and from any backup, the
// controller refuses the key, and nothing opens the box. Both a node that
// made its keys (db-1) and one enrolled before (db-2, its seed derived
// from the controller's). Fails when a file that printed a secret setting
// is sealed to the node alone, or its content key is kept anywhere the
// forget does not reach.
func TestForgettingReachesWhatWasSent(t *testing.T) {
	m := agenttest.New(t)
	m.Register("postgres.json")
	const path = "/etc/postgres/users.conf"
	for _, node := range []string{"db-1", "db-2"} {
		m.Enroll(node, "linux")
		pw := "forget-me-entirely-on-" + node
		m.Assign(node, "postgres", map[string]string{"password": pw})
		root := filepath.Join(t.TempDir(), "root")
		// open is what the attacker opens a box sealed to node with.
		var open func(where, box string) ([]byte, error)
		var stop func()
		if node == "db-1" {
			stop = m.AgentAt(node, root)
			seed, err := os.ReadFile(filepath.Join(agent.StateDir(root, ""), declaration.NodeSeedFile))
			m.Must(err)
			kp, err := nkeys.FromSeed(seed)
			m.Must(err)
			curve, err := declaration.SealCurve(kp)
			m.Must(err)
			open = func(where, box string) ([]byte, error) { return secret.OpenWith(curve, where, box) }
		} else {
			stop = m.LegacyAgentAt(node, root)
			open = func(where, box string) ([]byte, error) { return secret.Open(m.H.Core.Keys.NodeSeal(node), where, box) }
		}
		sent := m.Push(node).Sent[0]
		if r := m.Report(node, sent.Digest); r.Outcome != events.OutcomeApplied {
			t.Fatalf("%s did not apply: %+v", node, r)
		}
		users, err := os.ReadFile(filepath.Join(root, "etc/postgres/users.conf"))
		m.Must(err)
		if !strings.Contains(string(users), "postgres "+pw) {
			t.Fatalf("%s's agent did not open the file with its content key: %q", node, users)
		}
		stop()

		ds := commandstest.LastSent(t, m, node)
		d, err := declaration.Open(declaration.Sealed{Bytes: ds.Declaration, Signature: ds.Signature, Key: ds.Key, Proof: ds.Proof}, m.H.Core.PublicKey, m.H.Core.Mesh, node)
		m.Must(err)
		var asked *declaration.ContentKeyAsk
		var inner []byte
		for _, r := range d.Resources {
			if r.Path == path && r.Sealed != nil {
				asked = &declaration.ContentKeyAsk{Path: r.Path, Salts: r.Sealed.Keys}
				inner, err = open(secret.FilePlace(node, r.Path), r.Sealed.Box)
				m.Must(err)
			}
		}
		if asked == nil || len(asked.Salts) != 1 {
			t.Fatalf("%s's users.conf is not sealed under its setting's salt: %+v", node, asked)
		}
		if strings.Contains(string(inner), pw) {
			t.Fatalf("the keys that seal to %s alone open its secret from the log", node)
		}
		ask := func() declaration.ContentKeyGiven {
			t.Helper()
			b, _ := json.Marshal(declaration.ContentKeyRequest{Files: []declaration.ContentKeyAsk{*asked}})
			resp, err := m.H.Core.Store.NC().Request(events.ContentKeySubject(node), b, 5*time.Second)
			m.Must(err)
			var reply declaration.ContentKeyReply
			m.Must(json.Unmarshal(resp.Data, &reply))
			if reply.Error != "" || len(reply.Files) != 1 {
				t.Fatalf("the content key answer: %+v", reply)
			}
			return reply.Files[0]
		}
		// Before the forget the key the controller gives, opened with the
		// node's key, opens the file: so the attack below would succeed if
		// the key could still be had.
		key, err := open(secret.ContentKeyPlace(node, path), ask().Box)
		m.Must(err)
		clear, err := secret.Open(key, secret.FilePlace(node, path), string(inner))
		if err != nil || !strings.Contains(string(clear), "postgres "+pw) {
			t.Fatalf("the content key does not open %s's file before the forget: %v %q", node, err, clear)
		}

		_, err = m.H.Credentials.ForgetSecret(m.Ctx, wire.ForgetRequest{CommandID: wire.NewCommandID(), Node: node, Module: "postgres", Setting: "password"})
		m.Must(err)
		if g := ask(); g.Box != "" || !strings.Contains(g.Refused, "forgotten") {
			t.Fatalf("the controller still gives the key of %s's forgotten secret's file: %+v", node, g)
		}
		// A backup taken after holds no salt of it, and the controller key
		// plus the log derive nothing without one.
		salts, err := secrets.ExportSalts(m.Ctx, m.H.Core.Store.JetStream())
		m.Must(err)
		if _, held := salts[asked.Salts[0]]; held {
			t.Fatal("the salt of the forgotten setting is still in what a backup takes")
		}
		// The content key was never kept: not in the controller's home (its
		// key and read models), nor the agent's state. (It travelled in a
		// reply, which no stream stores.)
		for _, dir := range []string{m.Home, agent.StateDir(root, "")} {
			if commandstest.OnDisk(t, dir, key) {
				t.Fatalf("the content key of a forgotten secret's file is on disk under %s", dir)
			}
		}
		// An agent starting again takes up what it applied without the
		// key; the node says to set the secret again.
		if node == "db-1" {
			stop = m.AgentAt(node, root)
		} else {
			stop = m.LegacyAgentAt(node, root)
		}
		if st := m.WaitState(node, wire.StateCannotCompose); !strings.Contains(st.Detail, "--set-file password=") {
			t.Fatalf("%s after its secret was forgotten: %+v", node, st)
		}
		stop()
	}
}
