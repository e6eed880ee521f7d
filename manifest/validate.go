package manifest

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/meshctl/mesh/events"
)

// Validate checks everything registration promises: names that can be
// subject tokens, settings a template can reach, resources with one clean
// absolute path each, valid modes, one of content or template for a file,
// and templates that parse. Each refusal names the field.
func (m Manifest) Validate() error {
	if err := token("module", m.Module); err != nil {
		return err
	}
	for field, list := range map[string][]string{"requires": m.Requires, "provides": m.Provides, "consumes": m.Consumes, "claims": m.Claims} {
		for _, v := range list {
			if err := token(field, v); err != nil {
				return fmt.Errorf("manifest %s: %w", m.Module, err)
			}
		}
	}
	for _, name := range m.SettingNames() {
		if !identifier(name) {
			return fmt.Errorf("manifest %s: settings: %q is not a setting name: use letters, digits and '_', starting with a letter, so templates can say {{.Settings.%s}}", m.Module, name, name)
		}
		if s := m.Settings[name]; s.Required && s.Default != nil {
			return fmt.Errorf("manifest %s: settings.%s is required and has a default; give one or the other", m.Module, name)
		}
		if s := m.Settings[name]; s.Secret && s.Default != nil {
			return fmt.Errorf("manifest %s: settings.%s is secret and has a default, which the catalogue would keep in clear; drop the default and give the value with mesh assign --set-file", m.Module, name)
		}
	}
	for _, p := range m.Provisions {
		if !slices.Contains(m.Provides, p) {
			return fmt.Errorf("manifest %s: provisions names %s, which the module does not provide; list it in provides too, or drop it", m.Module, p)
		}
	}
	for _, req := range slices.Sorted(maps.Keys(m.Choose)) {
		if err := m.Choose[req].validate(req, m.Consumes); err != nil {
			return fmt.Errorf("manifest %s: choose.%s: %w", m.Module, req, err)
		}
	}
	switch m.Reconcile {
	case "", ReconcileNever, ReconcileBehind, ReconcileAlways:
	default:
		return fmt.Errorf("manifest %s: reconcile %q is unknown: use %q, %q or %q", m.Module, m.Reconcile, ReconcileNever, ReconcileBehind, ReconcileAlways)
	}
	if m.Run != nil {
		if err := m.Run.validate(); err != nil {
			return fmt.Errorf("manifest %s: run: %w", m.Module, err)
		}
	}
	seen := map[string]bool{}
	for i, r := range m.Resources {
		where := fmt.Sprintf("manifest %s: resources[%d]", m.Module, i)
		if err := r.validate(); err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
		if seen[r.Path] {
			return fmt.Errorf("%s: path %s is declared twice in this module", where, r.Path)
		}
		seen[r.Path] = true
	}
	return nil
}

func (r Resource) validate() error {
	switch r.Kind {
	case KindFile, KindDirectory, KindArtifact:
		if r.Name != "" {
			return fmt.Errorf("%s %s has a name; only a unit has one", r.Kind, r.Path)
		}
	case KindUnit:
		if err := r.validateUnit(); err != nil {
			return err
		}
	case "":
		return fmt.Errorf("kind is missing: use %q, %q, %q or %q", KindFile, KindDirectory, KindUnit, KindArtifact)
	default:
		return fmt.Errorf("kind %q is unknown: use %q, %q, %q or %q", r.Kind, KindFile, KindDirectory, KindUnit, KindArtifact)
	}
	if fault := pathFault(r.Path); fault != "" {
		return errors.New(fault)
	}
	if !cleanPath(r.Path) {
		return fmt.Errorf("path %q is not absolute and clean (begin with /, no '..', no trailing or double slash)", r.Path)
	}
	if _, err := parseMode(r.Mode); err != nil {
		return fmt.Errorf("mode: %w", err)
	}
	if err := r.validateArtifact(); err != nil {
		return err
	}
	switch {
	case r.Kind == KindDirectory && (r.Content != nil || r.Template != nil):
		return fmt.Errorf("directory %s has content or template; only a file has those", r.Path)
	case r.Kind == KindFile && (r.Content == nil) == (r.Template == nil):
		return fmt.Errorf("file %s needs exactly one of content and template", r.Path)
	case r.Template != nil:
		t, err := ParseTemplate(r.Path, *r.Template)
		if err != nil {
			return fmt.Errorf("template of %s: %v", r.Path, strings.TrimPrefix(err.Error(), "template: "))
		}
		if err := checkBounds(t); err != nil {
			return fmt.Errorf("template of %s %v", r.Path, err)
		}
	}
	return nil
}

func (c Choice) validate(req string, consumes []string) error {
	set := 0
	for _, on := range []bool{c.Label != "", c.Node != "", c.All} {
		if on {
			set++
		}
	}
	switch {
	case !slices.Contains(consumes, req):
		return fmt.Errorf("%s is not in consumes; a rule chooses among the providers of something the module consumes", req)
	case set != 1:
		return errors.New(`give exactly one of "label" (a provider whose node has my node's value of it), "node" (the provider on that node) and "all": true`)
	case c.Label != "":
		return events.ValidateLabelKey(c.Label)
	case c.Node != "":
		return events.ValidateName("node", c.Node)
	}
	return nil
}

func (r Run) validate() error {
	switch {
	case strings.TrimSpace(r.Command) == "":
		return errors.New("command is missing: name the program to run")
	case strings.ContainsRune(r.Command, 0):
		return errors.New("command holds a NUL byte")
	case r.Dir != "" && !cleanPath(r.Dir) && r.Dir != "/":
		return fmt.Errorf("dir %q is not absolute and clean (a path under the node's root, such as /var/lib/app)", r.Dir)
	}
	for k := range r.Env {
		switch {
		case !identifier(k):
			return fmt.Errorf("env: %q is not a variable name: use letters, digits and '_', starting with a letter", k)
		case strings.HasPrefix(k, "MESH_"):
			return fmt.Errorf("env: %s begins with MESH_, which the agent sets itself; choose another name", k)
		}
	}
	if r.Health != nil {
		if err := r.Health.validate(); err != nil {
			return fmt.Errorf("health: %w", err)
		}
	}
	for _, t := range r.Templates() {
		if _, err := ParseRunTemplate(t); err != nil {
			return err
		}
	}
	return nil
}

// token applies the mesh's name rule: these names become subject tokens.
func token(field, s string) error {
	if err := events.ValidateName(field, s); err != nil {
		return err
	}
	return nil
}

func identifier(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		letter := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
		if !letter && (i == 0 || !(c == '_' || c >= '0' && c <= '9')) {
			return false
		}
	}
	return true
}
