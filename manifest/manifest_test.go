package manifest

import (
	"strconv"
	"strings"
	"testing"
)

const postgres = `{
  "module": "postgres",
  "requires": ["linux"],
  "provides": ["postgres"],
  "consumes": [],
  "settings": {"port": {"default": "5432"}, "password": {"required": true}},
  "resources": [
    {"kind": "file", "path": "/etc/postgres/postgres.conf", "mode": "640",
     "template": "port = {{.Settings.port}}\npassword = {{.Settings.password}}\n"},
    {"kind": "directory", "path": "/etc/postgres", "mode": "0755"}
  ]
}`

func TestCanonicalIsLayoutIndependent(t *testing.T) {
	a, err := Parse([]byte(postgres))
	if err != nil {
		t.Fatal(err)
	}
	// The same content written another way: keys reordered, lists reordered
	// and repeated, other white space, the mode without its leading zero.
	b, err := Parse([]byte(`{"resources":[{"mode":"0755","path":"/etc/postgres","kind":"directory"},
		{"path":"/etc/postgres/postgres.conf","kind":"file","mode":"0640","template":"port = {{.Settings.port}}\npassword = {{.Settings.password}}\n"}],
		"settings":{"password":{"required":true},"port":{"default":"5432"}},"provides":["postgres","postgres"],"requires":["linux"],"module":"postgres"}`))
	if err != nil {
		t.Fatal(err)
	}
	if string(a.Canonical()) != string(b.Canonical()) || a.Build() != b.Build() {
		t.Fatalf("same content, different canonical forms:\n%s\n%s", a.Canonical(), b.Canonical())
	}
	if a.Resources[0].Path != "/etc/postgres" || a.Resources[1].Mode != "0640" {
		t.Fatalf("not normalised: %+v", a.Resources)
	}
	// Canonical bytes parse back to the same build.
	c, err := Parse(a.Canonical())
	if err != nil || c.Build() != a.Build() {
		t.Fatalf("canonical form does not round-trip: %v", err)
	}
	changed := strings.Replace(postgres, "5432", "5433", 1)
	d, _ := Parse([]byte(changed))
	if d.Build() == a.Build() {
		t.Fatal("different content, same build")
	}
}

func TestRefusalsNameTheField(t *testing.T) {
	cases := map[string]struct{ doc, say string }{
		"unknown field":     {`{"module":"m","colour":"red"}`, `unknown field "colour"`},
		"unknown kind":      {`{"module":"m","resources":[{"kind":"socket","path":"/a","mode":"0644"}]}`, `kind "socket" is unknown`},
		"bad mode":          {`{"module":"m","resources":[{"kind":"directory","path":"/a","mode":"rwx"}]}`, `mode "rwx"`},
		"mode too big":      {`{"module":"m","resources":[{"kind":"directory","path":"/a","mode":"17777"}]}`, `mode "17777"`},
		"relative path":     {`{"module":"m","resources":[{"kind":"directory","path":"etc/a","mode":"0755"}]}`, `path "etc/a"`},
		"dotdot":            {`{"module":"m","resources":[{"kind":"directory","path":"/etc/../a","mode":"0755"}]}`, `path "/etc/../a"`},
		"trailing slash":    {`{"module":"m","resources":[{"kind":"directory","path":"/etc/a/","mode":"0755"}]}`, `path "/etc/a/"`},
		"file without body": {`{"module":"m","resources":[{"kind":"file","path":"/a","mode":"0644"}]}`, `exactly one of content and template`},
		"directory content": {`{"module":"m","resources":[{"kind":"directory","path":"/a","mode":"0755","content":"x"}]}`, `only a file`},
		"bad template":      {`{"module":"m","resources":[{"kind":"file","path":"/a","mode":"0644","template":"{{.X"}]}`, `template of /a`},
		"two paths":         {`{"module":"m","resources":[{"kind":"directory","path":"/a","mode":"0755"},{"kind":"directory","path":"/a","mode":"0700"}]}`, `declared twice`},
		"bad module name":   {`{"module":"Postgres"}`, `lowercase letters`},
		"bad requirement":   {`{"module":"m","consumes":["a.b"]}`, `consumes`},
		"bad setting name":  {`{"module":"m","settings":{"db-port":{}}}`, `"db-port" is not a setting name`},
		"required+default":  {`{"module":"m","settings":{"p":{"required":true,"default":"1"}}}`, `required and has a default`},
		"two documents":     {`{"module":"m"}{"module":"n"}`, `one module`},
		"not json":          {`module: m`, `invalid character`},
		"setuid":            {`{"module":"m","resources":[{"kind":"file","path":"/a","mode":"4755","content":""}]}`, `sets setuid, setgid or sticky`},
		"every special bit": {`{"module":"m","resources":[{"kind":"directory","path":"/a","mode":"7777"}]}`, `sets setuid, setgid or sticky`},
		"NUL in a path":     {`{"module":"m","resources":[{"kind":"directory","path":"/a\u0000b","mode":"0755"}]}`, `control character (0x00)`},
		"newline in a path": {`{"module":"m","resources":[{"kind":"directory","path":"/a\nb","mode":"0755"}]}`, `control character (0x0a)`},
		"duplicate key":     {`{"module":"m","module":"n"}`, `names "module" twice`},
		"duplicate inside":  {`{"module":"m","resources":[{"kind":"directory","kind":"file","path":"/a","mode":"0755"}]}`, `resources[0] names "kind" twice`},
		"choose unconsumed": {`{"module":"m","consumes":["db"],"choose":{"cache":{"all":true}}}`, `choose.cache: cache is not in consumes`},
		"choose nothing":    {`{"module":"m","consumes":["db"],"choose":{"db":{}}}`, `choose.db: give exactly one of "label"`},
		"choose two rules":  {`{"module":"m","consumes":["db"],"choose":{"db":{"label":"zone","all":true}}}`, `choose.db: give exactly one of`},
		"choose bad label":  {`{"module":"m","consumes":["db"],"choose":{"db":{"label":"zone eu"}}}`, `choose.db: label key "zone eu" is not allowed`},
		"choose bad node":   {`{"module":"m","consumes":["db"],"choose":{"db":{"node":"DB-1"}}}`, `choose.db: node name "DB-1" contains`},
		"reconcile unknown": {`{"module":"m","reconcile":"sometimes"}`, `reconcile "sometimes" is unknown: use "never", "behind" or "always"`},
		"choose bad rule":   {`{"module":"m","consumes":["db"],"choose":{"db":{"nearest":true}}}`, `unknown field "nearest"`},
	}
	for name, c := range cases {
		_, err := Parse([]byte(c.doc))
		if err == nil || !strings.Contains(err.Error(), c.say) {
			t.Errorf("%s: err = %v, want it to say %q", name, err, c.say)
		}
	}
}

// A template's work is bounded before it is registered: no templates of
// its own, no calls to templates, no more than MaxRangeSteps steps of
// ranges over numbers, nested ones multiplied.
func TestTemplateBounds(t *testing.T) {
	file := func(tmpl string) string {
		return `{"module":"m","resources":[{"kind":"file","path":"/a","mode":"0644","template":` + strconv.Quote(tmpl) + `}]}`
	}
	for tmpl, say := range map[string]string{
		`{{range 2000000}}x{{end}}`:                             `ranges over 2000000 steps in all; at most 1000000`,
		`{{range 1000}}{{range 1001}}{{end}}{{end}}`:            `ranges over 1001000 steps`,
		`{{define "x"}}{{template "x"}}{{end}}{{template "x"}}`: `defines a template of its own`,
		`{{if true}}{{range 10}}{{template "y"}}{{end}}{{end}}`: `calls template "y"`,
	} {
		if _, err := Parse([]byte(file(tmpl))); err == nil || !strings.Contains(err.Error(), say) {
			t.Errorf("%s: %v, want it to say %q", tmpl, err, say)
		}
	}
	for _, tmpl := range []string{`{{range 1000}}{{range 1000}}.{{end}}{{end}}`, `{{range .Node.Capabilities}}{{.}}{{end}}`} {
		if _, err := Parse([]byte(file(tmpl))); err != nil {
			t.Errorf("%s: %v", tmpl, err)
		}
	}
}

// A rule to choose among providers is part of the build; a manifest without
// one encodes as it did before rules existed, so its build is unchanged.
func TestChooseIsInTheBuildOnlyWhenGiven(t *testing.T) {
	const doc = `{"module":"app","consumes":["postgres"]%s}`
	plain, err := Parse([]byte(strings.Replace(doc, "%s", "", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(plain.Canonical()), "choose") {
		t.Fatalf("a manifest without a rule encodes one: %s", plain.Canonical())
	}
	if empty, err := Parse([]byte(strings.Replace(doc, "%s", `,"choose":{}`, 1))); err != nil || empty.Build() != plain.Build() {
		t.Fatalf("an empty choose changed the build: %v", err)
	}
	for _, rule := range []string{`{"label":"zone"}`, `{"node":"db-1"}`, `{"all":true}`} {
		m, err := Parse([]byte(strings.Replace(doc, "%s", `,"choose":{"postgres":`+rule+`}`, 1)))
		if err != nil {
			t.Fatalf("%s: %v", rule, err)
		}
		if m.Build() == plain.Build() || !strings.Contains(string(m.Canonical()), `"choose":{"postgres":`+rule+`}`) {
			t.Fatalf("%s is not in the build: %s", rule, m.Canonical())
		}
	}
}
