package compose

import (
	"strings"
	"testing"

	"github.com/meshctl/mesh/manifest"
)

// greeterRun is a module whose program listens on a port that is a
// setting: its env value MODE is mode, and GREETER_HEALTH and its health
// probe are templates (manifest/runtemplate.go).
func greeterRun(mode string) string {
	return `{"module":"greeter",
  "settings":{"port":{"default":"4281"},"token":{"secret":true}},
  "run":{"command":"mesh-greeter",
    "env":{"GREETER_HEALTH":"127.0.0.1:{{.Settings.port}}","MODE":"` + mode + `"},
    "health":{"http":"http://127.0.0.1:{{.Settings.port}}/healthz"}}}`
}

// greeterWorld assigns the build of doc to db-1 and db-2 with settings.
func greeterWorld(t *testing.T, doc string, one, two map[string]string) (*World, manifest.Manifest) {
	t.Helper()
	in := input(t)
	m := mustParse(t, doc)
	in.Manifests[BuildRef{"greeter", m.Build()}] = m
	for node, s := range map[string]map[string]string{"db-1": one, "db-2": two} {
		in.Assignments = append(in.Assignments, Assignment{Node: node, Module: "greeter", Build: m.Build(), Settings: s})
	}
	return NewWorld(in), m
}

func runOf(t *testing.T, r Result) Runtime {
	t.Helper()
	if !r.Composable() || len(r.Declaration.Runs) != 1 {
		t.Fatalf("%s: want one run, got %s (%s)", r.Node, r.Bytes, r.Reason())
	}
	return r.Declaration.Runs[0]
}

// Two nodes of one build run the program on ports of their own: each
// declaration carries its env and probe rendered, the manifest (shared by
// both) is untouched, and a value without "{{" stays the literal it was.
func TestARunsEnvAndProbeAreRenderedPerNode(t *testing.T) {
	w, m := greeterWorld(t, greeterRun("plain"), map[string]string{}, map[string]string{"port": "4282"})
	one, two := runOf(t, w.Compose("db-1")), runOf(t, w.Compose("db-2"))
	for _, c := range []struct{ got, want string }{
		{one.Env["GREETER_HEALTH"], "127.0.0.1:4281"},
		{one.Health.HTTP, "http://127.0.0.1:4281/healthz"},
		{two.Env["GREETER_HEALTH"], "127.0.0.1:4282"},
		{two.Health.HTTP, "http://127.0.0.1:4282/healthz"},
		{two.Env["MODE"], "plain"},
		{m.Run.Env["GREETER_HEALTH"], "127.0.0.1:{{.Settings.port}}"},
		{m.Run.Health.HTTP, "http://127.0.0.1:{{.Settings.port}}/healthz"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}

// Registration refuses a run template that does not parse, naming the
// value, and accepts a probe target it can check only once rendered.
func TestARunTemplateIsCheckedAtRegistration(t *testing.T) {
	if _, err := manifest.Parse([]byte(greeterRun("plain {{"))); err == nil || !strings.Contains(err.Error(), "env MODE") {
		t.Fatalf("an env value that does not parse: %v", err)
	}
	if _, err := manifest.Parse([]byte(greeterRun("plain"))); err != nil {
		t.Fatalf("a templated probe target: %v", err)
	}
}

// A node whose rendered probe is no URL, or whose run would carry a
// secret in clear, cannot be composed and says why; its neighbour can.
func TestARunTemplateThatRendersBadlyIsTheNodesProblem(t *testing.T) {
	for _, c := range []struct {
		name, mode string
		two        map[string]string
		want       string
	}{
		{"a port that makes no URL", "plain", map[string]string{"port": "no port"}, "is not an http or https URL"},
		{"a secret in the environment", "{{.Settings.token}}", map[string]string{"token": "t0ken"}, "env MODE of greeter's run reads a secret"},
	} {
		t.Run(c.name, func(t *testing.T) {
			w, _ := greeterWorld(t, greeterRun(c.mode), map[string]string{}, c.two)
			r := w.Compose("db-2")
			if r.Composable() || !strings.Contains(r.Reason(), c.want) || !strings.Contains(r.Reason(), "greeter") {
				t.Fatalf("db-2 composed %s; reason %q, want it to say %q", r.Bytes, r.Reason(), c.want)
			}
			if c.mode == "plain" {
				runOf(t, w.Compose("db-1"))
			}
		})
	}
}
