package agent_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/meshctl/mesh/compose"
	"github.com/meshctl/mesh/wire"
)

// Issue 31, point 1, end to end on real agents: two postgres, one a zone,
// and an app in each zone. With no rule in app's manifest each app receives
// its own zone's database (locality), a backup choosing "all" lists both
// (examples/backup.json), app's file says so, its minted
// credential is the one that database lists for it and no other database
// lists it, and plan, node show and status name the choice and why. When a
// zone gains its database later, that zone's app moves to it and the
// credentials move with it: both ends, applied, agree.
func TestEachZoneReceivesItsOwnProvider(t *testing.T) {
	t.Parallel()
	m := newMesh(t)
	roots := map[string]string{}
	for _, n := range []struct{ name, zone string }{{"db-eu", "eu"}, {"db-us", "us"}, {"app-eu", "eu"}, {"app-us", "us"}} {
		_, err := m.H.Nodes.Enroll(m.Ctx, wire.EnrollRequest{CommandID: wire.NewCommandID(), Name: n.name,
			Capabilities: []string{"linux"}, Labels: map[string]string{"zone": n.zone}})
		m.Must(err)
		roots[n.name], _ = m.Agent(n.name)
	}
	m.Register("postgres.json")
	m.Register("app.json")
	m.Register("backup.json") // chooses "all": every postgres, as a list
	m.Assign("db-us", "postgres", map[string]string{"password": "us-secret"})
	m.Assign("app-eu", "app", nil)
	m.Assign("app-us", "app", nil)
	m.Assign("app-us", "backup", nil)
	// applied waits for each node a push sent to apply it, and names them.
	applied := func(r wire.PushReply) []string {
		t.Helper()
		var sent []string
		for _, s := range r.Sent {
			sent = append(sent, s.Node)
			if rep := m.Report(s.Node, s.Digest); rep.Outcome != "applied" {
				t.Fatalf("%s: %+v", s.Node, rep)
			}
		}
		slices.Sort(sent)
		return sent
	}
	pushApplied := func() { t.Helper(); applied(m.Push("")) }
	read := func(node, path string) string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(roots[node], path))
		m.Must(err)
		return string(b)
	}
	// receives checks that app on node was given db: its address in
	// app.conf, its minted password listed by db, its user by no other.
	receives := func(node, db string) {
		t.Helper()
		if conf := read(node, "etc/app/app.conf"); !strings.Contains(conf, "database = "+db+":5432") {
			t.Fatalf("%s's app.conf does not name %s: %q", node, db, conf)
		}
		var password string
		for _, l := range strings.Split(read(node, "etc/app/database.secret"), "\n") {
			if p, ok := strings.CutPrefix(l, "password = "); ok {
				password = p
			}
		}
		user := compose.User("app", node)
		for _, other := range []string{"db-eu", "db-us"} {
			users, err := os.ReadFile(filepath.Join(roots[other], "etc/postgres/users.conf"))
			// The one chosen lists this password; any other lists no
			// password at all for the user, not even a stale one.
			want, lists := other == db, err == nil && strings.Contains(string(users), "\n"+user+" "+password+"\n")
			if !want {
				lists = err == nil && strings.Contains(string(users), "\n"+user+" ")
			}
			if lists != want || len(password) != 32 {
				t.Fatalf("%s lists %s's user %s (password %q): %v, want %v (%q)", other, node, user, password, lists, want, users)
			}
		}
	}

	// One database, in us: both apps receive it, however far.
	pushApplied()
	receives("app-eu", "db-us")
	receives("app-us", "db-us")

	// A database in eu too: app-eu moves to it, app-us stays. Once db-eu
	// is pushed (and app-eu with it, as its consequence), pushing app-eu
	// alone sends, as its consequence, db-us: the database it left, which
	// must drop its credential. With receipts alone, db-us was unrelated.
	m.Assign("db-eu", "postgres", map[string]string{"password": "eu-secret"})
	applied(m.Push("db-eu"))
	if sent := applied(m.Push("app-eu")); !slices.Equal(sent, []string{"app-eu", "db-us"}) {
		t.Fatalf("push app-eu sent %v, want app-eu and, as a consequence, db-us (db-eu was pushed already)", sent)
	}
	receives("app-eu", "db-eu")
	receives("app-us", "db-us")
	pushApplied() // app-us's backup now lists db-eu too
	if got := read("app-us", "etc/backup/databases.conf"); !strings.HasSuffix(got, "\ndb-eu:5432 zone=eu\ndb-us:5432 zone=us\n") {
		t.Fatalf("backup, choosing all, lists %q", got)
	}

	plan, err := m.H.Push.Plan(m.Ctx, wire.NameRequest{Name: "app-eu"})
	m.Must(err)
	want := compose.Chosen{Receipt: compose.Receipt{Consumer: "app", Requirement: "postgres", Node: "db-eu", Module: "postgres"},
		Why: "closest by labels: shares zone=eu"}
	if len(plan.Chosen) != 1 || plan.Chosen[0] != want {
		t.Fatalf("plan of app-eu: chosen %+v, want %+v", plan.Chosen, want)
	}
	show, err := m.H.Status.ShowNode(m.Ctx, wire.NameRequest{Name: "app-us"})
	m.Must(err)
	if len(show.Chosen) != 3 || show.Chosen[0].Node != "db-us" || show.Chosen[0].Why != "closest by labels: shares zone=us" {
		t.Fatalf("node show app-us: chosen %+v", show.Chosen)
	}
	st, err := m.H.Status.Status(m.Ctx, wire.StatusRequest{})
	m.Must(err)
	var said []string
	for _, c := range st.Chosen {
		said = append(said, c.ConsumerNode+" <- "+c.Node+": "+c.Why)
	}
	if !slices.Equal(said, []string{"app-eu <- db-eu: closest by labels: shares zone=eu",
		"app-us <- db-us: closest by labels: shares zone=us", "app-us <- db-eu: all", "app-us <- db-us: all"}) {
		t.Fatalf("status names the choices as %q", said)
	}
	if !st.Well {
		t.Fatalf("status is not well after both pushes applied: %+v", st)
	}
}
