package compose

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/meshctl/mesh/manifest"
)

func mustParse(t testing.TB, doc string) manifest.Manifest {
	t.Helper()
	m, err := manifest.Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

const (
	postgresDoc = `{"module":"postgres","requires":["linux"],"provides":["postgres"],
	  "settings":{"port":{"default":"5432"},"password":{"required":true}},
	  "resources":[{"kind":"directory","path":"/etc/postgres","mode":"0755"},
	    {"kind":"file","path":"/etc/postgres/postgres.conf","mode":"0640","template":"port = {{.Settings.port}}\npassword = {{.Settings.password}}\n"}]}`
	appDoc = `{"module":"app","consumes":["postgres"],
	  "resources":[{"kind":"file","path":"/etc/app/app.conf","mode":"0644",
	    "template":"node = {{.Node.Name}}\ndb = {{.Receives.postgres.Node}}:{{.Receives.postgres.Settings.port}} ({{.Receives.postgres.Labels.zone}})\n"}]}`
)

// world is a mesh of db-1 (linux) and web-1 (no capabilities) with postgres
// and app registered; assignments are the test's.
func input(t testing.TB, assignments ...Assignment) Input {
	pg, app := mustParse(t, postgresDoc), mustParse(t, appDoc)
	return Input{
		Mesh: "test",
		Nodes: []Node{
			{Name: "db-1", Capabilities: []string{"linux"}, Labels: map[string]string{"zone": "eu-1"}},
			{Name: "db-2", Capabilities: []string{"linux"}, Labels: map[string]string{}},
			{Name: "web-1", Capabilities: []string{}, Labels: map[string]string{}},
		},
		Assignments: assignments,
		Manifests: map[BuildRef]manifest.Manifest{
			{"postgres", pg.Build()}: pg, {"app", app.Build()}: app,
		},
	}
}

func pgOn(t testing.TB, node string) Assignment {
	return Assignment{Node: node, Module: "postgres", Build: mustParse(t, postgresDoc).Build(), Settings: map[string]string{"password": "s3cret"}}
}

func appOn(t testing.TB, node string) Assignment {
	return Assignment{Node: node, Module: "app", Build: mustParse(t, appDoc).Build(), Settings: map[string]string{}}
}

func content(t *testing.T, r Result, path string) string {
	t.Helper()
	if !r.Composable() {
		t.Fatalf("%s cannot be composed: %s", r.Node, r.Reason())
	}
	for _, res := range r.Declaration.Resources {
		if res.Path == path && res.Content != nil {
			return *res.Content
		}
	}
	t.Fatalf("%s has no file %s: %s", r.Node, path, r.Bytes)
	return ""
}

func TestConsumerReceivesItsProvider(t *testing.T) {
	w := NewWorld(input(t, pgOn(t, "db-1"), appOn(t, "web-1")))
	app := w.Compose("web-1")
	if got := content(t, app, "/etc/app/app.conf"); got != "node = web-1\ndb = db-1:5432 (eu-1)\n" {
		t.Fatalf("app.conf = %q", got)
	}
	if len(app.Declaration.Receives) != 1 || app.Declaration.Receives[0] != (Receipt{Consumer: "app", Requirement: "postgres", Node: "db-1", Module: "postgres"}) {
		t.Fatalf("receives: %+v", app.Declaration.Receives)
	}
	db := w.Compose("db-1")
	if got := content(t, db, "/etc/postgres/postgres.conf"); got != "port = 5432\npassword = s3cret\n" {
		t.Fatalf("postgres.conf = %q", got)
	}
	if db.Declaration.Resources[0].Path != "/etc/postgres" || db.Declaration.Modules[0].Module != "postgres" {
		t.Fatalf("resources not sorted or builds missing: %s", db.Bytes)
	}
	if db.Digest != Digest(db.Bytes) || len(db.Digest) != 64 {
		t.Fatalf("digest %q is not the sha256 of the bytes", db.Digest)
	}
}

// Same read models, same bytes: whatever order the assignments were listed
// in, and however often it is asked.
func TestCompositionIsDeterministic(t *testing.T) {
	as := []Assignment{pgOn(t, "db-1"), appOn(t, "web-1"), appOn(t, "db-1")}
	want := map[string]string{}
	for _, n := range []string{"db-1", "web-1"} {
		want[n] = string(NewWorld(input(t, as...)).Compose(n).Bytes)
	}
	rng := rand.New(rand.NewPCG(7, 7))
	for range 50 {
		rng.Shuffle(len(as), func(i, j int) { as[i], as[j] = as[j], as[i] })
		in := input(t, as...)
		rng.Shuffle(len(in.Nodes), func(i, j int) { in.Nodes[i], in.Nodes[j] = in.Nodes[j], in.Nodes[i] })
		w := NewWorld(in)
		for n, b := range want {
			if got := string(w.Compose(n).Bytes); got != b {
				t.Fatalf("%s composed differently after reordering:\n%s\n%s", n, b, got)
			}
		}
	}
}

func TestEmptyDeclarationIsValid(t *testing.T) {
	r := NewWorld(input(t)).Compose("web-1")
	if !r.Composable() || string(r.Bytes) != `{"mesh":"test","node":"web-1","modules":[],"resources":[],"receives":[]}` {
		t.Fatalf("empty: %s (%s)", r.Bytes, r.Reason())
	}
}

func TestMissingCapabilityLeavesTheModuleOut(t *testing.T) {
	pg := pgOn(t, "web-1")
	r := NewWorld(input(t, pg, pgOn(t, "db-1"), appOn(t, "web-1"))).Compose("web-1")
	if !r.Composable() || len(r.LeftOut) != 1 || r.LeftOut[0].Reason != "postgres needs linux, web-1 has none" {
		t.Fatalf("left out: %+v (%s)", r.LeftOut, r.Reason())
	}
	if len(r.Declaration.Modules) != 1 || r.Declaration.Modules[0].Module != "app" {
		t.Fatalf("the healthy module beside it did not compose: %s", r.Bytes)
	}
}

func TestNodesThatCannotBeComposed(t *testing.T) {
	broken := mustParse(t, `{"module":"broken","resources":[{"kind":"file","path":"/etc/postgres/postgres.conf","mode":"0644","content":"x"}]}`)
	badTmpl := mustParse(t, `{"module":"badtmpl","resources":[{"kind":"file","path":"/b","mode":"0644","template":"{{.Settings.nope}}"}]}`)
	cases := []struct {
		name string
		in   func() Input
		node string
		say  string
	}{
		{"nobody provides", func() Input { return input(t, appOn(t, "web-1")) }, "web-1",
			"app needs postgres, which no assigned module provides"},
		{"only provider cannot be hosted", func() Input { return input(t, pgOn(t, "web-1"), appOn(t, "db-1")) }, "db-1",
			"whose only provider cannot be hosted: postgres needs linux, web-1 has none"},
		{"template error", func() Input {
			in := input(t, Assignment{Node: "web-1", Module: "badtmpl", Build: badTmpl.Build()})
			in.Manifests[BuildRef{"badtmpl", badTmpl.Build()}] = badTmpl
			return in
		}, "web-1", `the template of /b in badtmpl failed: at <.Settings.nope>: map has no entry for key "nope"`},
		{"two modules, one path", func() Input {
			in := input(t, pgOn(t, "db-1"), Assignment{Node: "db-1", Module: "broken", Build: broken.Build()})
			in.Manifests[BuildRef{"broken", broken.Build()}] = broken
			return in
		}, "db-1", "/etc/postgres/postgres.conf is declared by both broken and postgres"},
		{"build not in catalogue", func() Input { return input(t, Assignment{Node: "web-1", Module: "app", Build: "feedface"}) }, "web-1",
			"build feedface of app is not in the catalogue"},
		{"required setting unset", func() Input {
			a := pgOn(t, "db-1")
			a.Settings = map[string]string{}
			return input(t, a)
		}, "db-1", "setting password of postgres is required and not set on db-1"},
		{"unknown node", func() Input { return input(t) }, "db-9", "db-9 is not an enrolled, active node"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := NewWorld(c.in()).Compose(c.node)
			if r.Composable() || !strings.Contains(r.Reason(), c.say) {
				t.Fatalf("composable=%v reason %q, want it to say %q", r.Composable(), r.Reason(), c.say)
			}
		})
	}
}

// BenchmarkCompose composes 10,000 nodes with 5 modules each (one consuming a
// provider on another node) from an indexed world, one core. Target: 20,000
// nodes a second or better.
func BenchmarkCompose(b *testing.B) {
	in := Input{Mesh: "bench", Manifests: map[BuildRef]manifest.Manifest{}}
	pg := mustParse(b, postgresDoc)
	in.Manifests[BuildRef{"postgres", pg.Build()}] = pg
	in.Nodes = append(in.Nodes, Node{Name: "db-1", Capabilities: []string{"linux"}, Labels: map[string]string{"zone": "a"}})
	in.Assignments = append(in.Assignments, Assignment{Node: "db-1", Module: "postgres", Build: pg.Build(), Settings: map[string]string{"password": "x"}})
	var mods []manifest.Manifest
	for i := range 5 {
		consumes := ""
		if i == 0 {
			consumes = `"consumes":["postgres"],`
		}
		m := mustParse(b, fmt.Sprintf(`{"module":"m%d","requires":["linux"],%s"settings":{"port":{"default":"80%d"}},
		  "resources":[{"kind":"directory","path":"/etc/m%d","mode":"0755"},
		    {"kind":"file","path":"/etc/m%d/m.conf","mode":"0644","template":"node = {{.Node.Name}}\nport = {{.Settings.port}}\nzone = {{.Node.Labels.zone}}\n%s"}]}`,
			i, consumes, i, i, i, map[bool]string{true: `db = {{.Receives.postgres.Node}}:{{.Receives.postgres.Settings.port}}\n`}[i == 0]))
		in.Manifests[BuildRef{m.Module, m.Build()}] = m
		mods = append(mods, m)
	}
	const nodes = 10_000
	for i := range nodes {
		name := fmt.Sprintf("web-%d", i)
		in.Nodes = append(in.Nodes, Node{Name: name, Capabilities: []string{"linux"}, Labels: map[string]string{"zone": "a"}})
		for _, m := range mods {
			in.Assignments = append(in.Assignments, Assignment{Node: name, Module: m.Module, Build: m.Build(), Settings: map[string]string{}})
		}
	}
	w := NewWorld(in)
	names := w.Nodes()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if r := w.Compose(names[i%len(names)]); !r.Composable() {
			b.Fatal(r.Reason())
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "nodes/s")
}

// The line diff is bounded on any input: an edit to a long file shows just
// the edit (the common start and end set aside), and a long part rewritten
// whole is said in one line naming the bound, not compared line by line.
func TestLineDiffIsBounded(t *testing.T) {
	var a, b strings.Builder
	for i := range 20_000 {
		fmt.Fprintf(&a, "line %d\n", i)
		if i == 10_000 {
			b.WriteString("changed\n")
			continue
		}
		fmt.Fprintf(&b, "line %d\n", i)
	}
	d := LineDiff(a.String(), b.String())
	var changed []string
	for _, l := range d {
		if !strings.HasPrefix(l, "  ") {
			changed = append(changed, l)
		}
	}
	if len(d) != 20_001 || len(changed) != 2 || changed[0] != "- line 10000" || changed[1] != "+ changed" {
		t.Fatalf("one line edited in 20,000: %d lines, changed %q", len(d), changed)
	}
	rewritten := strings.ReplaceAll(a.String(), "line", "row")
	d = LineDiff(a.String(), rewritten)
	if len(d) != 1 || !strings.HasPrefix(d[0], "~ lines 1 to 20000 changed: 20000 line(s) became 20000") || !strings.Contains(d[0], "over 4000000 comparisons") {
		t.Fatalf("20,000 lines rewritten: %d lines, first %q", len(d), d[0])
	}
}

// A template's output is bounded while it runs: one that writes over
// manifest.MaxRendered makes its node one that cannot be composed, named
// with the bound, and every other node composes.
func TestTemplateOutputIsBounded(t *testing.T) {
	big := mustParse(t, `{"module":"big","resources":[{"kind":"file","path":"/big","mode":"0644",
	  "template":"{{range 1000}}{{range 1000}}0123456789{{end}}{{end}}"}]}`)
	in := input(t, pgOn(t, "db-1"), Assignment{Node: "db-2", Module: "big", Build: big.Build(), Settings: map[string]string{}})
	in.Manifests[BuildRef{"big", big.Build()}] = big
	w := NewWorld(in)
	if r := w.Compose("db-2"); r.Composable() || !strings.Contains(r.Reason(), fmt.Sprintf("over %d bytes", manifest.MaxRendered)) {
		t.Fatalf("a template writing 10 MB: composable %v, %s", r.Composable(), r.Reason())
	}
	if r := w.Compose("db-1"); !r.Composable() {
		t.Fatalf("the node beside it: %s", r.Reason())
	}
}
