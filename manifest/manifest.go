package manifest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
	"text/template"
)

// Manifest is one module's declaration of what it needs and holds.
type Manifest struct {
	Module    string             `json:"module"`
	Requires  []string           `json:"requires"`
	Provides  []string           `json:"provides"`
	Consumes  []string           `json:"consumes"`
	Settings  map[string]Setting `json:"settings"`
	Resources []Resource         `json:"resources"`
	// Provisions lists what the module provides for which the mesh mints
	// a credential for each consumer it serves (rule 21): the provider's
	// templates read .Consumers, each consumer's .Receives.X.Credential.
	// Left out of the canonical form when empty, so that every build
	// registered before provisions existed keeps its digest.
	Provisions []string `json:"provisions,omitempty"`
	// Run is the program the module runs on each node it is on, which
	// the node's agent supervises; nil for a module that is only files.
	// Omitted when nil, so builds registered before it keep their digest.
	Run *Run `json:"run,omitempty"`
	// Claims are the seats the module holds where it is assigned: roles
	// that one module instance holds mesh-wide at a time (issue 18, rule
	// 24). Omitted when empty, so builds registered before keep their
	// digest.
	Claims []string `json:"claims,omitempty"`
	// Choose says, for a requirement in consumes, which of several
	// providers this module receives (issue 31): without a rule the
	// nearest one is chosen (compose's locality). Omitted when empty, so
	// builds registered before keep their digest.
	Choose map[string]Choice `json:"choose,omitempty"`
	// Reconcile says whether a controller run with --reconcile may send
	// this module's nodes their declarations by itself (issue 31, rule
	// 27): ReconcileNever, ReconcileBehind (what "" means) or
	// ReconcileAlways. Omitted when empty, so builds registered before
	// keep their digest.
	Reconcile string `json:"reconcile,omitempty"`
}

// A module's reconcile modes, weakest first: a node is sent by the
// reconciler only as far as the weakest mode among its modules allows.
const (
	// ReconcileNever leaves the module's nodes to people: only a push,
	// a rollout or a declare sends them.
	ReconcileNever = "never"
	// ReconcileBehind sends a node when what it would be sent differs
	// from what it was last sent.
	ReconcileBehind = "behind"
	// ReconcileAlways also sends a node its declaration again when its
	// agent reports drift it left as found.
	ReconcileAlways = "always"
)

// ReconcileMode is the module's reconcile mode, ReconcileBehind when the
// manifest says none.
func (m Manifest) ReconcileMode() string {
	if m.Reconcile == "" {
		return ReconcileBehind
	}
	return m.Reconcile
}

// Choice is one requirement's rule: exactly one of its fields is set.
type Choice struct {
	// Label: the providers whose node has the same value of this label
	// as the consumer's node ("zone": a consumer in zone eu receives a
	// provider in zone eu).
	Label string `json:"label,omitempty"`
	// Node: the provider on the node of this name.
	Node string `json:"node,omitempty"`
	// All: every provider, which templates range over as a list
	// ({{range .Receives.postgres}}).
	All bool `json:"all,omitempty"`
}

// Run is a module's program: what the agent starts after applying a
// declaration that holds the module, restarts when it exits or when a
// resource of its module changed, and stops when the module leaves.
type Run struct {
	// Command is a program on the machine: a name looked up in the
	// agent's PATH, or an absolute path.
	Command string   `json:"command"`
	Args    []string `json:"args,omitempty"`
	// Env is added to what the agent gives every runtime (PATH and the
	// MESH_ variables, which it may not set).
	Env map[string]string `json:"env,omitempty"`
	// Dir is the working directory, an absolute path under the node's
	// root ("/" when empty).
	Dir string `json:"dir,omitempty"`
	// User runs it as another user; the agent must be able to (root).
	User string `json:"user,omitempty"`
	// Health is how the agent asks whether the program serves; nil: it is
	// well while it runs. Omitted when nil, so builds registered before
	// checks existed keep their digest.
	Health *Health `json:"health,omitempty"`
}

// Setting is one setting a module takes on each node it is assigned to.
type Setting struct {
	Default  *string `json:"default,omitempty"`
	Required bool    `json:"required,omitempty"`
	// Secret: the value is sealed before it is appended, and shown only
	// as set and its version (rule 21). A file whose template reads it is
	// sent sealed to its node.
	Secret bool `json:"secret,omitempty"`
}

// Resource kinds.
const (
	KindFile      = "file"
	KindDirectory = "directory"
)

// Resource is one thing a module puts on a machine.
type Resource struct {
	Kind     string  `json:"kind"`
	Path     string  `json:"path"`
	Mode     string  `json:"mode"`
	Content  *string `json:"content,omitempty"`
	Template *string `json:"template,omitempty"`
	// Name is a unit's name (KindUnit, unit.go); its path is UnitDir/Name.
	// Omitted for every other kind, so their builds keep their digests.
	Name string `json:"name,omitempty"`
}

// Parse reads a manifest, refusing unknown fields, and validates it. The
// result is normalised: lists sorted and unique, resources sorted by path,
// so that Canonical does not depend on how the file was written.
func Parse(data []byte) (Manifest, error) {
	if err := NoDuplicateKeys(data); err != nil {
		return Manifest{}, fmt.Errorf("manifest: %w", err)
	}
	var m Manifest
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return Manifest{}, fmt.Errorf("manifest: %s", strings.TrimPrefix(err.Error(), "json: "))
	}
	if dec.More() {
		return Manifest{}, errors.New("manifest: there is more after the manifest's closing brace; a file holds one module")
	}
	m.normalise()
	if err := m.Validate(); err != nil {
		return Manifest{}, err
	}
	return m, nil
}

func (m *Manifest) normalise() {
	slices.Sort(m.Claims)
	m.Claims = slices.Compact(m.Claims)
	for _, l := range []*[]string{&m.Requires, &m.Provides, &m.Consumes} {
		if *l == nil {
			*l = []string{}
		}
		slices.Sort(*l)
		*l = slices.Compact(*l)
	}
	if len(m.Choose) == 0 {
		m.Choose = nil // omitted: see Choose
	}
	if m.Run != nil && m.Run.Health != nil {
		m.Run.Health.normalise()
	}
	if len(m.Provisions) == 0 {
		m.Provisions = nil // omitted: see Provisions
	}
	slices.Sort(m.Provisions)
	m.Provisions = slices.Compact(m.Provisions)
	if m.Settings == nil {
		m.Settings = map[string]Setting{}
	}
	if m.Resources == nil {
		m.Resources = []Resource{}
	}
	for i := range m.Resources {
		m.Resources[i].normaliseUnit() // before the sort: it may give the path
		if mode, err := parseMode(m.Resources[i].Mode); err == nil {
			m.Resources[i].Mode = fmt.Sprintf("%04o", mode)
		}
	}
	slices.SortStableFunc(m.Resources, func(a, b Resource) int { return strings.Compare(a.Path, b.Path) })
}

// Canonical is the manifest's one byte form: its Go field order, map keys
// sorted, no insignificant white space, no HTML escaping.
func (m Manifest) Canonical() []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	// A Manifest holds only strings, bools, slices and maps: it always encodes.
	_ = enc.Encode(m)
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// Build is the hex sha256 of the canonical form: the identity of this content.
func (m Manifest) Build() string {
	sum := sha256.Sum256(m.Canonical())
	return hex.EncodeToString(sum[:])
}

// ShortBuild is how a build is shown to people: its first 12 hex digits.
func ShortBuild(build string) string {
	if len(build) > 12 {
		return build[:12]
	}
	return build
}

// ParseMode reads an octal file mode such as "0640".
func ParseMode(s string) (uint32, error) { return parseMode(s) }

func parseMode(s string) (uint32, error) {
	if len(s) < 3 || len(s) > 4 {
		return 0, fmt.Errorf("mode %q is not an octal mode such as 0644", s)
	}
	v, err := strconv.ParseUint(s, 8, 32)
	if err != nil || v > 0o7777 {
		return 0, fmt.Errorf("mode %q is not an octal mode such as 0644", s)
	}
	if v > 0o777 {
		// The agent writes permission bits only: accepting setuid, setgid
		// or sticky and dropping them would report applied what was not.
		return 0, fmt.Errorf("mode %q sets setuid, setgid or sticky, which the agent does not set; use permission bits only (0777 or less)", s)
	}
	return uint32(v), nil
}

// ParseTemplate parses a resource's template the way composition runs it:
// a missing key is an error, never "<no value>" written into a config file.
func ParseTemplate(name, text string) (*template.Template, error) {
	return template.New(name).Option("missingkey=error").Parse(text)
}

// SettingNames lists the settings a module takes, sorted.
func (m Manifest) SettingNames() []string {
	names := make([]string, 0, len(m.Settings))
	for k := range m.Settings {
		names = append(names, k)
	}
	slices.Sort(names)
	return names
}

// cleanPath reports whether p is absolute and clean: no "..", no ".", no
// double or trailing slash. A resource path is joined under the agent's root,
// so anything else could point outside it or name one file two ways.
func cleanPath(p string) bool {
	return strings.HasPrefix(p, "/") && p != "/" && path.Clean(p) == p && !strings.Contains(p, "/../")
}
