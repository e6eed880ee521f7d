package manifest

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
)

// A unit resource (issue 32) is a systemd unit a module puts on a machine:
//
//	{"kind": "unit", "name": "greeter.service", "content": "[Unit]\n..."}
//
// Its file is UnitDir/NAME under the agent's root, mode 0644 unless the
// manifest says otherwise; the agent writes it, reloads systemd, and enables
// and restarts the unit when it changed. Composition leaves it out of a node
// without UnitCapability, with the reason.
const (
	KindUnit = "unit"
	// UnitDir is where systemd reads the units an administrator installs,
	// ahead of those of packages (/usr/lib/systemd/system): a unit of the
	// mesh's overrides a package's of the same name, as a hand-written one
	// would.
	UnitDir = "/etc/systemd/system"
	// UnitCapability is the capability a node needs to be sent units: the
	// fact its agent reports where systemd runs the machine.
	UnitCapability = "systemd"
	// unitMode is a unit file's mode when the manifest gives none: systemd
	// reads it as root, and everyone may read what it runs.
	unitMode = "0644"
	// maxUnitName is systemd's bound on a unit's name (UNIT_NAME_MAX).
	maxUnitName = 255
)

// unitTypes are the unit types a file can declare and the agent can enable
// and restart; a device or scope unit is systemd's own, never a file.
var unitTypes = []string{"service", "socket", "timer", "path", "target", "mount", "automount", "swap", "slice"}

// UnitName is the name of the unit whose file is p, "" when p is not a file
// directly in UnitDir.
func UnitName(p string) string {
	dir, name := path.Split(p)
	if dir != UnitDir+"/" {
		return ""
	}
	return name
}

// normaliseUnit gives a unit both its name and its path, and its default
// mode, so that a manifest naming the unit either way has one canonical
// form and one build. A name that is no unit's is left for validateUnit.
func (r *Resource) normaliseUnit() {
	if r.Kind != KindUnit {
		return
	}
	switch {
	case r.Name == "" && r.Path != "":
		r.Name = UnitName(r.Path)
	case r.Path == "" && r.Name != "" && ValidateUnitName(r.Name) == nil:
		r.Path = UnitDir + "/" + r.Name
	}
	if r.Mode == "" {
		r.Mode = unitMode
	}
}

// validateUnit checks what only a unit has: a name systemd takes, the
// path that name gives (or none), and a body that is not empty.
func (r Resource) validateUnit() error {
	name := r.Name
	if name == "" {
		name = UnitName(r.Path)
	}
	switch {
	case name == "" && r.Path == "":
		return errors.New(`unit has no name: give "name", such as "greeter.service"`)
	case name == "":
		return fmt.Errorf("unit path %q is not a file in %s; give the unit's \"name\" instead of a path", r.Path, UnitDir)
	}
	if err := ValidateUnitName(name); err != nil {
		return err
	}
	if r.Path != "" && r.Path != UnitDir+"/"+name {
		return fmt.Errorf("unit %s has path %q, but its file is %s/%s; drop \"path\"", name, r.Path, UnitDir, name)
	}
	if mode, err := parseMode(r.Mode); err == nil && mode&0o022 != 0 {
		// systemd runs what a unit says as root: a unit others may write
		// is root for whoever can write it.
		return fmt.Errorf("unit %s has mode %s, which lets others than its owner write it, and systemd runs what it says as root; use %s", name, r.Mode, unitMode)
	}
	body := r.Content
	if r.Template != nil {
		body = r.Template
	}
	switch {
	case (r.Content == nil) == (r.Template == nil):
		return fmt.Errorf("unit %s needs exactly one of content and template", name)
	case strings.TrimSpace(*body) == "":
		return fmt.Errorf("unit %s has an empty body; give its sections ([Unit], [Service], [Install]) as its content or template", name)
	}
	return nil
}

// ValidateUnitName refuses a name systemd would not take, or one that could
// reach systemctl as anything but a unit's name, in one sentence naming the
// rule. The agent holds a declaration's units to it again before it runs
// systemctl with them.
func ValidateUnitName(name string) error {
	dot := strings.LastIndexByte(name, '.')
	stem, typ := name[:max(dot, 0)], name[dot+1:]
	switch {
	case strings.Contains(name, "/"):
		return fmt.Errorf("unit name %q holds a slash; name the unit only (its file goes in %s)", name, UnitDir)
	case len(name) > maxUnitName:
		return fmt.Errorf("unit name %.40q... is %d bytes long; systemd takes at most %d", name, len(name), maxUnitName)
	case dot < 0 || !slices.Contains(unitTypes, typ):
		return fmt.Errorf("unit name %q does not end in a unit type: use .%s", name, strings.Join(unitTypes, ", ."))
	case stem == "":
		return fmt.Errorf("unit name %q has nothing before its type", name)
	case stem[0] == '-' || stem[0] == '.':
		// A leading '-' would reach systemctl as a flag.
		return fmt.Errorf("unit name %q begins with %q; begin it with a letter or digit", name, stem[0])
	case strings.Contains(stem, "@"):
		return fmt.Errorf("unit name %q is a template or an instance (it holds @), which the agent does not enable; name a unit of its own", name)
	}
	for _, c := range stem {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune(":_.-\\", c)) {
			return fmt.Errorf("unit name %q holds %q; systemd takes letters, digits and : _ . - \\", name, c)
		}
	}
	return nil
}
