package compose

import (
	"strings"
	"testing"

	"github.com/meshctl/mesh/manifest"
)

const unitDoc = `{"module":"greeter","settings":{"greeting":{"default":"hello"}},
  "resources":[{"kind":"file","path":"/etc/greeter.conf","mode":"0644","template":"{{.Settings.greeting}}\n"},
    {"kind":"unit","name":"greeter.service","template":"[Service]\nExecStart=/usr/bin/greeter {{.Settings.greeting}}\n"}]}`

// A unit reaches a node that has systemd, rendered like a file; a node
// without it is sent the rest of the module, and the unit is left out and
// named with why. Fails when a unit reaches a node without systemd, or
// when leaving it out takes the module's other resources with it.
func TestAUnitIsLeftOutWhereTheNodeHasNoSystemd(t *testing.T) {
	m := mustParse(t, unitDoc)
	in := Input{Mesh: "test",
		Nodes: []Node{
			{Name: "box", Capabilities: []string{"linux", "systemd"}},
			{Name: "mac", Capabilities: []string{"darwin"}},
		},
		Manifests: map[BuildRef]manifest.Manifest{{"greeter", m.Build()}: m},
	}
	for _, n := range []string{"box", "mac"} {
		in.Assignments = append(in.Assignments, Assignment{Node: n, Module: "greeter", Build: m.Build(), Settings: map[string]string{"greeting": "hi"}})
	}
	w := NewWorld(in)
	box := w.Compose("box")
	if got := content(t, box, "/etc/systemd/system/greeter.service"); got != "[Service]\nExecStart=/usr/bin/greeter hi\n" {
		t.Fatalf("the unit rendered %q", got)
	}
	if u := box.Declaration.Resources[1]; u.Kind != manifest.KindUnit || u.Mode != "0644" || u.Module != "greeter" || len(box.LeftOut) != 0 {
		t.Fatalf("box's unit: %+v, left out %+v", u, box.LeftOut)
	}
	mac := w.Compose("mac")
	if got := content(t, mac, "/etc/greeter.conf"); got != "hi\n" {
		t.Fatalf("mac's greeter.conf = %q", got)
	}
	if len(mac.Declaration.Resources) != 1 || len(mac.Declaration.Modules) != 1 {
		t.Fatalf("mac was sent %s", mac.Bytes)
	}
	want := LeftOut{Module: "greeter", Unit: "greeter.service",
		Reason: "unit greeter.service of greeter needs systemd, mac has darwin (its agent reports systemd where systemd runs the machine)"}
	if len(mac.LeftOut) != 1 || mac.LeftOut[0] != want {
		t.Fatalf("mac's left out: %+v", mac.LeftOut)
	}
	if strings.Contains(string(mac.Bytes), "greeter.service") {
		t.Fatalf("the unit reached mac: %s", mac.Bytes)
	}
}
