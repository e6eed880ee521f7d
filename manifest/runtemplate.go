package manifest

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"text/template"
)

// A run's env values and its health probe's target may be templates, read
// with what a file's template reads (.Settings, .Node, .Receives): two
// nodes on one machine, or one program on many, then listen on ports of
// their own, set per assignment (mesh assign NODE greeter --set
// port=4282), without a build per port. A value is a template when it
// holds "{{"; one without stays the literal it always was, so a build
// registered before keeps its meaning.

// RunTemplate is one templated value of a run: Name says it for people
// ("env GREETER_HEALTH", "health http"), Text is the template.
type RunTemplate struct{ Name, Text string }

// Health probe targets, as RunTemplate names them.
const (
	runHealthTCP  = "health " + ProbeTCP
	runHealthHTTP = "health " + ProbeHTTP
)

func isTemplate(s string) bool { return strings.Contains(s, "{{") }

// Templates lists the run's templated values, env first in name order, so
// composition renders them in one order every time.
func (r Run) Templates() []RunTemplate {
	var out []RunTemplate
	for _, k := range slices.Sorted(maps.Keys(r.Env)) {
		if isTemplate(r.Env[k]) {
			out = append(out, RunTemplate{"env " + k, r.Env[k]})
		}
	}
	if h := r.Health; h != nil {
		if isTemplate(h.TCP) {
			out = append(out, RunTemplate{runHealthTCP, h.TCP})
		}
		if isTemplate(h.HTTP) {
			out = append(out, RunTemplate{runHealthHTTP, h.HTTP})
		}
	}
	return out
}

// Rendered is the run with its templated values replaced by what each
// rendered to (by RunTemplate.Name), and the rendered probe checked as
// registration checks a literal one. r itself is not changed: a manifest
// is shared by every node its build is on.
func (r Run) Rendered(values map[string]string) (Run, error) {
	out := r
	if len(r.Env) > 0 {
		out.Env = make(map[string]string, len(r.Env))
		for k, v := range r.Env {
			if isTemplate(v) {
				v = values["env "+k]
			}
			out.Env[k] = v
		}
	}
	if r.Health != nil {
		h := *r.Health
		if isTemplate(h.TCP) {
			h.TCP = values[runHealthTCP]
		}
		if isTemplate(h.HTTP) {
			h.HTTP = values[runHealthHTTP]
		}
		if err := h.validateProbe(); err != nil {
			return out, fmt.Errorf("its health check, rendered: %w", err)
		}
		out.Health = &h
	}
	return out, nil
}

// ParseRunTemplate parses one of a run's templated values as composition
// runs it, bounded as a file's template is.
func ParseRunTemplate(t RunTemplate) (*template.Template, error) {
	p, err := ParseTemplate(t.Name, t.Text)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", t.Name, strings.TrimPrefix(err.Error(), "template: "))
	}
	if err := checkBounds(p); err != nil {
		return nil, fmt.Errorf("%s %v", t.Name, err)
	}
	return p, nil
}
