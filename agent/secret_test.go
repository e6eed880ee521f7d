package agent_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/events/store"
)

// Rule 21: a secret setting and a minted credential reach the files of the
// nodes that need them, and no message of the stream holds either in
// clear. Fails when the setting is not sealed in the log, when a file that
// read a secret is sent in clear, or when the two ends mint differently.
func TestSecretsReachTheirFilesAndNeverTheStream(t *testing.T) {
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
	err = m.H.Store.Read(m.Ctx, store.ReadOptions{}, func(msg store.Msg) error {
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
