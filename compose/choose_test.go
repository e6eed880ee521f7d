package compose

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/meshctl/mesh/manifest"
)

// zonedDB provides postgres and provisions it, listing whom it serves, so a
// test reads from the provider's own file which consumers chose it.
const zonedDB = `{"module":"postgres","requires":["linux"],"provides":["postgres"],"provisions":["postgres"],
  "resources":[{"kind":"file","path":"/etc/postgres/users.conf","mode":"0644",
    "template":"{{range .Consumers}}{{.Module}}@{{.Node}}\n{{end}}"}]}`

// zonedApp is a consumer whose rule (choose.postgres) is the test's: "" for
// none. Under "all" it ranges over what it receives.
func zonedApp(t testing.TB, rule string) manifest.Manifest {
	t.Helper()
	tmpl, choose := `db = {{.Receives.postgres.Node}}\n`, ""
	if rule != "" {
		choose = `,"choose":{"postgres":` + rule + `}`
	}
	if strings.Contains(rule, "all") {
		tmpl = `{{range .Receives.postgres}}db = {{.Node}}\n{{end}}`
	}
	return mustParse(t, `{"module":"app","consumes":["postgres"]`+choose+`,
	  "resources":[{"kind":"file","path":"/etc/app/app.conf","mode":"0644","template":"`+tmpl+`"}]}`)
}

// zoned is a mesh of two zones, a database node in each (db-eu, db-us),
// web nodes in each and one with no labels, each node on the overlay;
// postgres is assigned to the nodes dbs names, app to the nodes apps names.
func zoned(t testing.TB, rule string, dbs, apps []string) Input {
	t.Helper()
	pg, app := mustParse(t, zonedDB), zonedApp(t, rule)
	in := Input{Mesh: "test", Network: "10.9.0.0/24", Manifests: map[BuildRef]manifest.Manifest{
		{"postgres", pg.Build()}: pg, {"app", app.Build()}: app}}
	for i, n := range []struct {
		name   string
		labels map[string]string
	}{
		{"db-eu", map[string]string{"zone": "eu"}},
		{"db-eu-r1", map[string]string{"zone": "eu", "rack": "r1"}},
		{"db-us", map[string]string{"zone": "us"}},
		{"web-ap", map[string]string{"zone": "ap"}},
		{"web-eu", map[string]string{"zone": "eu"}},
		{"web-eu-r1", map[string]string{"zone": "eu", "rack": "r1"}},
		{"web-none", map[string]string{}},
		{"web-us", map[string]string{"zone": "us", "tier": "web"}},
	} {
		in.Nodes = append(in.Nodes, Node{Name: n.name, Capabilities: []string{"linux"}, Labels: n.labels,
			Address: fmt.Sprintf("10.9.0.%d", i+1), Key: "key-" + n.name})
	}
	for _, n := range dbs {
		in.Assignments = append(in.Assignments, Assignment{Node: n, Module: "postgres", Build: pg.Build()})
	}
	for _, n := range apps {
		in.Assignments = append(in.Assignments, Assignment{Node: n, Module: "app", Build: app.Build()})
	}
	return in
}

// Every rule, and the default, choosing among providers: which one each
// consumer receives and the phrase saying why, or the sentence saying why
// none, naming the consumer, its node and the way out.
func TestChoosingAmongProviders(t *testing.T) {
	twoZones := []string{"db-eu", "db-us"}
	cases := []struct {
		name, rule string
		dbs        []string
		node       string
		want       []string // the provider nodes it receives, in order
		why        string
		unresolved string
	}{
		{name: "default: the provider on its own node", dbs: twoZones, node: "db-us", want: []string{"db-us"}, why: "same node"},
		{name: "default: the only provider, however far", dbs: []string{"db-us"}, node: "web-eu", want: []string{"db-us"}, why: "only provider"},
		{name: "default: the one sharing a label", dbs: twoZones, node: "web-us", want: []string{"db-us"}, why: "closest by labels: shares zone=us"},
		{name: "default: the one sharing the most labels", dbs: []string{"db-eu", "db-eu-r1", "db-us"}, node: "web-eu-r1",
			want: []string{"db-eu-r1"}, why: "closest by labels: shares rack=r1, zone=eu"},
		{name: "default: a tie goes to the first node by name", dbs: []string{"db-eu", "db-eu-r1"}, node: "web-eu",
			want: []string{"db-eu"}, why: "closest by labels: shares zone=eu"},
		{name: "default: nothing shared, the first node by name", dbs: twoZones, node: "web-none",
			want: []string{"db-eu"}, why: "first by node name, none shares a label"},
		{name: "label: same value as mine", rule: `{"label":"zone"}`, dbs: twoZones, node: "web-us", want: []string{"db-us"}, why: "shares zone=us"},
		{name: "label: the nearest of several that match", rule: `{"label":"zone"}`, dbs: []string{"db-eu", "db-eu-r1", "db-us"}, node: "web-eu-r1",
			want: []string{"db-eu-r1"}, why: "shares zone=eu"},
		{name: "label: beats the same node", rule: `{"label":"zone"}`, dbs: []string{"web-none", "db-eu"}, node: "web-eu",
			want: []string{"db-eu"}, why: "shares zone=eu"},
		{name: "label: my node lacks it", rule: `{"label":"zone"}`, dbs: twoZones, node: "web-none",
			unresolved: "app on web-none chooses its postgres by label zone, which web-none does not have; give web-none that label (mesh node set) or change the rule"},
		{name: "label: no provider's node has my value", rule: `{"label":"zone"}`, dbs: []string{"db-eu", "web-none"}, node: "web-ap",
			unresolved: "app on web-ap chooses its postgres by zone=ap, which no provider's node has (postgres on db-eu (zone=eu), postgres on web-none (no zone)); assign one on a node with zone=ap or change the rule"},
		{name: "node: by name, however far", rule: `{"node":"db-us"}`, dbs: twoZones, node: "web-eu", want: []string{"db-us"}, why: "by name"},
		{name: "node: no provider there", rule: `{"node":"db-eu-r1"}`, dbs: twoZones, node: "web-eu",
			unresolved: "app on web-eu chooses its postgres on node db-eu-r1, where no hostable module provides it (its providers are: postgres on db-eu, postgres on db-us); assign a provider there or change the rule"},
		{name: "node: many providers, the first few named", rule: `{"node":"db-9"}`, node: "web-eu",
			dbs:        []string{"db-eu", "db-eu-r1", "db-us", "web-ap", "web-eu-r1", "web-none", "web-us"},
			unresolved: "app on web-eu chooses its postgres on node db-9, where no hostable module provides it (its providers are: postgres on db-eu, postgres on db-eu-r1, postgres on db-us, postgres on web-ap, postgres on web-eu-r1, and 2 more); assign a provider there or change the rule"},
		{name: "all: every provider, by node", rule: `{"all":true}`, dbs: []string{"db-us", "db-eu"}, node: "web-eu", want: []string{"db-eu", "db-us"}, why: "all"},
		{name: "all: none at all is still none", rule: `{"all":true}`, node: "web-eu", unresolved: "app needs postgres, which no assigned module provides"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := NewWorld(zoned(t, c.rule, c.dbs, []string{c.node}))
			r := w.Compose(c.node)
			if c.unresolved != "" {
				if r.Composable() || len(r.Unresolved) != 1 || r.Unresolved[0].Reason != c.unresolved || r.Unresolved[0].Module != "app" {
					t.Fatalf("composable=%v unresolved %+v, want %q", r.Composable(), r.Unresolved, c.unresolved)
				}
				// The fault stays with the consumer: every provider composes.
				for _, db := range c.dbs {
					if !w.Compose(db).Composable() {
						t.Fatalf("a consumer's unresolved requirement stopped %s composing: %s", db, w.Compose(db).Reason())
					}
				}
				return
			}
			var got, conf []string
			for i, ch := range r.Chosen {
				if ch.Why != c.why || ch.Receipt != r.Declaration.Receives[i] {
					t.Fatalf("chosen %+v, want why %q and the declaration's receipt %+v", ch, c.why, r.Declaration.Receives[i])
				}
				got = append(got, ch.Node)
				conf = append(conf, "db = "+ch.Node+"\n")
			}
			if !slices.Equal(got, c.want) || len(r.Declaration.Receives) != len(c.want) {
				t.Fatalf("receives %v (%+v), want %v", got, r.Declaration.Receives, c.want)
			}
			if s := content(t, r, "/etc/app/app.conf"); s != strings.Join(conf, "") {
				t.Fatalf("app.conf = %q, want %q", s, strings.Join(conf, ""))
			}
			// Each provider agrees: it lists the consumer exactly when it
			// was chosen, and the overlay links exactly those two nodes.
			for _, db := range c.dbs {
				chosen := slices.Contains(c.want, db)
				users := w.Compose(db)
				if db == c.node {
					continue // its own node: no peer, and its file beside app's
				}
				if lists := content(t, users, "/etc/postgres/users.conf") == "app@"+c.node+"\n"; lists != chosen {
					t.Fatalf("%s lists app@%s: %v, chosen: %v", db, c.node, lists, chosen)
				}
				if peer := slices.ContainsFunc(r.Declaration.Network.Peers, func(p Peer) bool { return p.Node == db }); peer != chosen {
					t.Fatalf("%s is a peer of %s: %v, chosen: %v (%+v)", db, c.node, peer, chosen, r.Declaration.Network.Peers)
				}
			}
		})
	}
}

// When the provider chosen changes (a nearer one is assigned), both ends
// move together: the new provider serves the consumer and the old one
// drops it. (That the credential follows, minted for the new pair, is
// proven end to end with real keys: agent's TestEachZoneReceivesItsOwnProvider.)
func TestAChangeOfProviderMovesBothEnds(t *testing.T) {
	before := NewWorld(zoned(t, "", []string{"db-us"}, []string{"web-eu"}))
	after := NewWorld(zoned(t, "", []string{"db-us", "db-eu"}, []string{"web-eu"}))
	if got := content(t, before.Compose("db-us"), "/etc/postgres/users.conf"); got != "app@web-eu\n" {
		t.Fatalf("before: db-us serves %q", got)
	}
	if got := content(t, after.Compose("db-us"), "/etc/postgres/users.conf"); got != "" {
		t.Fatalf("after: db-us still serves %q", got)
	}
	if got := content(t, after.Compose("db-eu"), "/etc/postgres/users.conf"); got != "app@web-eu\n" {
		t.Fatalf("after: db-eu serves %q", got)
	}
}
