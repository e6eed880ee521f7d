package agent_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meshctl/mesh/aggregates"
	"github.com/meshctl/mesh/embedded/embeddedtest"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/wire"
)

// minted reads the password app's end holds.
func minted(t *testing.T, appRoot string) string {
	t.Helper()
	cred, err := os.ReadFile(filepath.Join(appRoot, "etc/app/database.secret"))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(cred), "\n") {
		if p, ok := strings.CutPrefix(l, "password = "); ok {
			return p
		}
	}
	t.Fatalf("database.secret holds no password: %q", cred)
	return ""
}

func (m *mesh) rotate() (wire.RotateReply, error) {
	return m.H.Credentials.Rotate(m.Ctx, wire.RotateRequest{CommandID: wire.NewCommandID(), Provider: "postgres", Consumer: "app"})
}

// openRotations are status's causes that name a rotation.
func (m *mesh) openRotations() []string {
	m.T.Helper()
	s, err := m.H.Status.Status(m.Ctx, wire.StatusRequest{})
	m.Must(err)
	var out []string
	for _, c := range s.Causes {
		if strings.Contains(c, "rotation") {
			out = append(out, c)
		}
	}
	return out
}

// Rule 7 with two real agents: a rotation with one end that cannot be
// composed sends nothing and changes no record; with both composable, both
// ends apply the new credential, and status names the rotation half
// applied while one end has not. Fails when the all-or-nothing check is
// removed (the log moves), when the generation is not minted into the
// credential (the password stays), or when status forgets an open one.
func TestRotationReachesBothEndsOrNeither(t *testing.T) {
	t.Parallel()
	m := newMesh(t)
	dbRoot, appRoot, stopApp := m.dbAndApp()
	m.Assign("db-1", "postgres", map[string]string{"password": "pw"})
	m.Assign("app-1", "app", nil)
	for _, s := range m.Push("").Sent {
		if rep := m.Report(s.Node, s.Digest); rep.Outcome != "applied" {
			t.Fatalf("%s: %+v", s.Node, rep)
		}
	}
	before := minted(t, appRoot)

	// app-1 cannot be composed: a module of it consumes what no one provides.
	m.WriteModule(`{"module":"lonely","consumes":["queue"]}`)
	m.Assign("app-1", "lonely", nil)
	// The controller's events only: an agent's own report (its facts, a
	// late runtime word) may land meanwhile and is no record a rotation
	// wrote.
	st, found, err := m.H.Core.Store.Last(m.Ctx, events.SubjectsEvents)
	m.Must(err)
	if !found || !strings.HasPrefix(st.Subject, events.EventPrefix+".") {
		t.Fatalf("the controller's last event: %v %s", found, st.Subject)
	}
	_, err = m.rotate()
	if !errors.Is(err, aggregates.ErrUncomposable) || !strings.Contains(err.Error(), "app-1: ") || !strings.Contains(err.Error(), "nothing was sent") {
		t.Fatalf("a rotation with an uncomposable end: %v", err)
	}
	after, _, err := m.H.Core.Store.Last(m.Ctx, events.SubjectsEvents)
	m.Must(err)
	if after.Seq != st.Seq {
		t.Fatalf("a refused rotation wrote to the log: last event %d (%s), then %d (%s)", st.Seq, st.Subject, after.Seq, after.Subject)
	}

	_, err = m.H.Nodes.Unassign(m.Ctx, wire.UnassignRequest{CommandID: wire.NewCommandID(), Node: "app-1", Module: "lonely"})
	m.Must(err)
	// app-1's agent is down: the rotation reaches db-1 first.
	stopApp()
	r, err := m.rotate()
	m.Must(err)
	if r.Generation != 1 || len(r.Sent) != 2 {
		t.Fatalf("rotate: %+v", r)
	}
	for _, s := range r.Sent {
		if s.Node == "db-1" {
			m.Report(s.Node, s.Digest)
		}
	}
	open := m.openRotations()
	if len(open) != 1 || !strings.Contains(open[0], "half applied: applied on db-1, not on app-1") {
		t.Fatalf("status while one end applied: %q", open)
	}
	m.AgentAt("app-1", appRoot)
	for _, s := range r.Sent {
		if rep := m.Report(s.Node, s.Digest); rep.Outcome != "applied" {
			t.Fatalf("%s: %+v", s.Node, rep)
		}
	}
	now := minted(t, appRoot)
	// db-1 accepts the old password too until app-1 applied; then the
	// controller drops it by itself (the overlap's own tests say more).
	var users []byte
	embeddedtest.Eventually(t, "db-1 to list app-1's new password only", func() bool {
		var err error
		users, err = os.ReadFile(filepath.Join(dbRoot, "etc/postgres/users.conf"))
		m.Must(err)
		return !strings.Contains(string(users), before)
	})
	if now == before || !strings.Contains(string(users), "app_app_1 "+now) {
		t.Fatalf("after the rotation app-1 holds %q (had %q); db-1 lists %q", now, before, users)
	}
	// db-1's file is written before its report on the drop is folded:
	// status names the rotation until that report lands, then nothing.
	embeddedtest.Eventually(t, "status to name no open rotation once both ends applied", func() bool {
		return len(m.openRotations()) == 0
	})
	// Nothing else moves the generation: a push sends what they hold.
	for _, s := range m.Push("").Sent {
		m.Report(s.Node, s.Digest)
	}
	if got := minted(t, appRoot); got != now {
		t.Fatalf("a push after the rotation moved the credential from %q to %q", now, got)
	}
	m.Verified()
}
