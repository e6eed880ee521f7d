package manifest

import (
	"strings"
	"testing"
)

func unitDoc(resource string) string {
	return `{"module":"m","resources":[` + resource + `]}`
}

// A unit is named; its path and default mode follow from the name, so a
// manifest naming it by name and one giving the path it implies are one
// build, and the canonical form parses back to it. Fails when the path is
// not derived, or the two spellings make two builds.
func TestAUnitsPathFollowsFromItsName(t *testing.T) {
	byName, err := Parse([]byte(unitDoc(`{"kind":"unit","name":"greeter.service","content":"[Service]\nExecStart=/bin/true\n"}`)))
	if err != nil {
		t.Fatal(err)
	}
	r := byName.Resources[0]
	if r.Path != "/etc/systemd/system/greeter.service" || r.Mode != "0644" || r.Name != "greeter.service" {
		t.Fatalf("a unit by name normalised to %+v", r)
	}
	byPath, err := Parse([]byte(unitDoc(`{"kind":"unit","path":"/etc/systemd/system/greeter.service","mode":"644","content":"[Service]\nExecStart=/bin/true\n"}`)))
	if err != nil {
		t.Fatal(err)
	}
	if byPath.Build() != byName.Build() {
		t.Fatalf("one unit, two builds:\n%s\n%s", byName.Canonical(), byPath.Canonical())
	}
	again, err := Parse(byName.Canonical())
	if err != nil || again.Build() != byName.Build() {
		t.Fatalf("a unit's canonical form does not round-trip: %v", err)
	}
	// A file keeps its canonical form: no name is written for it.
	plain, err := Parse([]byte(postgres))
	if err != nil || strings.Contains(string(plain.Canonical()), `"name"`) {
		t.Fatalf("a manifest without units encodes a name: %s %v", plain.Canonical(), err)
	}
}

// Each bad unit is refused at registration in one sentence naming the unit
// and what to do. Fails when a name systemctl could misread, or a unit with
// nothing in it, is registered.
func TestABadUnitIsRefusedInOneSentence(t *testing.T) {
	body := `"content":"[Service]\nExecStart=/bin/true\n"`
	for name, c := range map[string]struct{ resource, say string }{
		"slash":           {`{"kind":"unit","name":"a/b.service",` + body + `}`, `unit name "a/b.service" holds a slash; name the unit only`},
		"empty content":   {`{"kind":"unit","name":"a.service","content":""}`, `unit a.service has an empty body`},
		"blank template":  {`{"kind":"unit","name":"a.service","template":"  \n"}`, `unit a.service has an empty body`},
		"no body":         {`{"kind":"unit","name":"a.service"}`, `unit a.service needs exactly one of content and template`},
		"no name":         {`{"kind":"unit",` + body + `}`, `unit has no name: give "name"`},
		"no type":         {`{"kind":"unit","name":"greeter",` + body + `}`, `unit name "greeter" does not end in a unit type: use .service`},
		"device":          {`{"kind":"unit","name":"sda.device",` + body + `}`, `does not end in a unit type`},
		"flag":            {`{"kind":"unit","name":"-now.service",` + body + `}`, `begins with '-'`},
		"template unit":   {`{"kind":"unit","name":"getty@.service",` + body + `}`, `is a template or an instance`},
		"space":           {`{"kind":"unit","name":"my app.service",` + body + `}`, `holds ' '`},
		"newline":         {`{"kind":"unit","name":"a\n.service",` + body + `}`, `holds '\n'`},
		"only a type":     {`{"kind":"unit","name":".service",` + body + `}`, `has nothing before its type`},
		"other path":      {`{"kind":"unit","name":"a.service","path":"/etc/a.service",` + body + `}`, `drop "path"`},
		"path elsewhere":  {`{"kind":"unit","path":"/lib/systemd/system/a.service",` + body + `}`, `is not a file in /etc/systemd/system`},
		"name on a file":  {`{"kind":"file","path":"/a","mode":"0644","name":"a.service",` + body + `}`, `file /a has a name; only a unit has one`},
		"too long":        {`{"kind":"unit","name":"` + strings.Repeat("a", 250) + `.service",` + body + `}`, `systemd takes at most 255`},
		"group writable":  {`{"kind":"unit","name":"a.service","mode":"0664",` + body + `}`, `unit a.service has mode 0664, which lets others than its owner write it`},
		"world writable":  {`{"kind":"unit","name":"a.service","mode":"0777",` + body + `}`, `use 0644`},
		"bad template":    {`{"kind":"unit","name":"a.service","template":"{{.X"}`, `template of /etc/systemd/system/a.service`},
		"twice as a file": {`{"kind":"unit","name":"a.service",` + body + `},{"kind":"file","path":"/etc/systemd/system/a.service","mode":"0644",` + body + `}`, `declared twice`},
	} {
		_, err := Parse([]byte(unitDoc(c.resource)))
		if err == nil || !strings.Contains(err.Error(), c.say) {
			t.Errorf("%s: err = %v, want it to say %q", name, err, c.say)
		}
	}
}
