package compose

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/meshctl/mesh/manifest"
)

// Result is the composition of one node: its declaration, canonical bytes and
// digest when it composes; what was left out and why; and when it cannot be
// composed, every reason.
type Result struct {
	Node        string
	Declaration *Declaration // nil when the node cannot be composed
	Bytes       []byte
	Digest      string
	LeftOut     []LeftOut
	Unresolved  []Unresolved
	Problems    []string // template failures, path conflicts, missing builds
	// Chosen is each provider the node's consumers receive and why, in
	// the order of the declaration's receives.
	Chosen []Chosen
}

// LeftOut is a module the node cannot host, or a unit of a module it hosts
// (Unit), with the sentence saying why.
type LeftOut struct {
	Module string `json:"module"`
	Reason string `json:"reason"`
	// Unit names the unit left out of a module the node hosts (unit.go);
	// "" when the whole module is left out.
	Unit string `json:"unit,omitempty"`
}

// Unresolved is a requirement of a consumer the mesh cannot satisfy.
type Unresolved struct {
	Module      string `json:"module"`
	Requirement string `json:"requirement"`
	Reason      string `json:"reason"`
}

// Composable reports whether the node has a declaration.
func (r Result) Composable() bool { return r.Declaration != nil }

// Reason is every reason the node cannot be composed, in one sentence.
func (r Result) Reason() string {
	var parts []string
	for _, u := range r.Unresolved {
		parts = append(parts, u.Reason)
	}
	parts = append(parts, r.Problems...)
	return strings.Join(parts, "; ")
}

// Compose answers what node should be. It never fails as a whole: a node the
// world does not know composes to nothing with that said as its problem.
func (w *World) Compose(node string) Result {
	res := Result{Node: node}
	if !w.Has(node) {
		res.Problems = append(res.Problems, fmt.Sprintf("%s is not an enrolled, active node", node))
		return res
	}
	n := w.node(node)
	d := Declaration{Mesh: w.mesh, Node: node, Modules: []ModuleBuild{}, Resources: []Resource{}, Receives: []Receipt{}}
	if w.network != "" && n.Address != "" {
		d.Network = &Network{Range: w.network, Address: n.Address, Key: n.Key, Peers: w.peers(node)}
	}
	owner := map[string]string{} // path -> module, for conflicts
	var buf bytes.Buffer
	sl := &sealer{secrets: w.secrets, salts: map[string]bool{}}
	for _, p := range w.assigned(node) {
		if p.err != nil {
			res.Problems = append(res.Problems, p.err.Error())
			continue
		}
		if len(p.missing) > 0 || p.releasing != "" {
			res.LeftOut = append(res.LeftOut, LeftOut{Module: p.Module, Reason: needs(p, n)})
			continue
		}
		receives, ok := w.resolve(p, &res)
		if !ok {
			continue
		}
		for _, r := range receives {
			rc := Receipt{Consumer: p.Module, Requirement: r.requirement, Node: r.Node, Module: r.Module}
			d.Receives = append(d.Receives, rc)
			res.Chosen = append(res.Chosen, Chosen{Receipt: rc, Why: r.why})
		}
		d.Modules = append(d.Modules, ModuleBuild{Module: p.Module, Build: p.Build})
		data, err := w.templateData(p, n, receives, sl, d.Network)
		if err != nil {
			res.Problems = append(res.Problems, err.Error())
			continue
		}
		if p.m.Run != nil {
			r, err := p.renderRun(*p.m.Run, data, sl, &buf)
			if err != nil {
				res.Problems = append(res.Problems, err.Error())
				continue
			}
			d.Runs = append(d.Runs, Runtime{Module: p.Module, Command: r.Command, Args: r.Args, Env: r.Env, Dir: r.Dir, User: r.User, Health: r.Health,
				Digest: runsArtifact(p.m, r.Command)})
		}
		for _, r := range p.m.Resources {
			if l, out := unitLeftOut(p.Module, r, n); out {
				res.LeftOut = append(res.LeftOut, l)
				continue
			}
			if other, taken := owner[r.Path]; taken {
				res.Problems = append(res.Problems, fmt.Sprintf("%s is declared by both %s and %s", r.Path, other, p.Module))
				continue
			}
			owner[r.Path] = p.Module
			out := Resource{Path: r.Path, Kind: r.Kind, Mode: r.Mode, Module: p.Module, Content: r.Content}
			if r.Kind == manifest.KindArtifact {
				if err := w.artifact(p.Module, r, &out); err != nil {
					res.Problems = append(res.Problems, err.Error())
					continue
				}
			}
			if r.Template != nil {
				buf.Reset()
				sl.begin()
				if err := p.templates[r.Path].Execute(&boundedWriter{w: &buf, left: manifest.MaxRendered}, data); err != nil {
					res.Problems = append(res.Problems, fmt.Sprintf("the template of %s in %s failed: %s", r.Path, p.Module, templateError(err)))
					continue
				}
				s := buf.String()
				out.Content = &s
				if err := sl.seal(node, &out); err != nil {
					res.Problems = append(res.Problems, err.Error())
					continue
				}
			}
			d.Resources = append(d.Resources, out)
		}
	}
	if len(res.Unresolved) > 0 || len(res.Problems) > 0 {
		return res
	}
	slices.SortFunc(d.Resources, func(a, b Resource) int { return strings.Compare(a.Path, b.Path) })
	res.Declaration = &d
	res.Bytes = d.Canonical()
	res.Digest = Digest(res.Bytes)
	return res
}

// provision is one provider a consumer receives for one requirement.
type provision struct {
	requirement string
	why         string
	placed
}

// resolve chooses the providers of each requirement of p (choose), or
// records why a requirement has none.
func (w *World) resolve(p placed, res *Result) ([]provision, bool) {
	var out []provision
	ok := true
	for _, r := range p.m.Consumes {
		ch := w.choose(p, r)
		if ch.unresolved != "" {
			res.Unresolved = append(res.Unresolved, Unresolved{Module: p.Module, Requirement: r, Reason: ch.unresolved})
			ok = false
			continue
		}
		for _, pr := range ch.providers {
			out = append(out, provision{requirement: r, why: ch.why, placed: pr})
		}
	}
	return out, ok
}

// templateData is what a template sees: .Node, .Settings, .Receives.<req>
// (a list of every provider when the consumer's rule is "all"), and for a provider that provisions credentials, .Consumers. A secret
// setting or credential is a *Secret: printing it marks the file.
type templateData struct {
	Node      Node
	Settings  map[string]any
	Receives  map[string]any // receivedData, or []receivedData under "all"
	Consumers []ConsumerCredential
	// Peers are the nodes this node must reach on the overlay; Network
	// its range and private key (a *Secret: a file that prints it is
	// sealed). Empty, and Network.PrivateKey nil, without a network.
	Peers   []Peer
	Network networkData
}

type networkData struct {
	Range      string
	PrivateKey *Secret
}

type receivedData struct {
	Node       string
	Address    string // the provider's node's overlay address
	Module     string
	Labels     map[string]string
	Settings   map[string]any
	Credential *Credential // when the provider provisions this requirement
}

func (w *World) templateData(p placed, n Node, receives []provision, sl *sealer, net *Network) (templateData, error) {
	settings, err := effective(p, sl)
	if err != nil {
		return templateData{}, err
	}
	data := templateData{Node: n, Settings: settings, Receives: map[string]any{}, Consumers: []ConsumerCredential{}, Peers: []Peer{}}
	if net != nil {
		data.Peers, data.Network.Range = net.Peers, net.Range
		if w.secrets != nil {
			data.Network.PrivateKey = sl.secret(w.secrets.OverlayKey(n.Name))
		}
	}
	for _, r := range receives {
		ps, err := effective(r.placed, sl)
		if err != nil {
			return templateData{}, err
		}
		rd := receivedData{Node: r.Node, Address: w.node(r.Node).Address, Module: r.Module, Labels: w.node(r.Node).Labels, Settings: ps}
		if slices.Contains(r.m.Provisions, r.requirement) {
			rd.Credential = w.credential(r.placed, r.requirement, p, sl, 0)
		}
		if p.m.Choose[r.requirement].All {
			list, _ := data.Receives[r.requirement].([]receivedData)
			data.Receives[r.requirement] = append(list, rd)
		} else {
			data.Receives[r.requirement] = rd
		}
	}
	for _, req := range p.m.Provisions {
		for _, c := range w.consumers[req] {
			if w.choose(c, req).serves(p) {
				cc := ConsumerCredential{Node: c.Node, Module: c.Module, Requirement: req, Credential: *w.credential(p, req, c, sl, 0)}
				if pair := (Pair{Provider: p.Module, Consumer: c.Module}); w.overlap[pair] && w.gens[pair] > 0 {
					cc.Previous = w.credential(p, req, c, sl, 1)
				}
				data.Consumers = append(data.Consumers, cc)
			}
		}
	}
	return data, nil
}

// candidates are the hostable providers of req that could serve c: every
// one but c itself, sorted by node and module; choose picks among them.
func (w *World) candidates(c placed, req string) []placed {
	var out []placed
	for _, cand := range w.providers[req] {
		if cand.Node != c.Node || cand.Module != c.Module {
			out = append(out, cand)
		}
	}
	return out
}

// credential is the credential provider mints for consumer's req, back
// generations before the pair's current one (0: the current; 1: the one an
// overlap still accepts): the same at both ends, since both are minted from
// the same names and generation.
func (w *World) credential(provider placed, req string, consumer placed, sl *sealer, back uint64) *Credential {
	c := &Credential{User: User(consumer.Module, consumer.Node)}
	if w.secrets == nil {
		c.Password = sl.secret("") // printing it fails the file: nothing can seal it
		return c
	}
	c.Password = sl.secret(w.secrets.Mint(CredentialRef{Mesh: w.mesh, ProviderNode: provider.Node, Provider: provider.Module,
		Requirement: req, ConsumerNode: consumer.Node, Consumer: consumer.Module,
		Generation: w.gens[Pair{Provider: provider.Module, Consumer: consumer.Module}] - back}))
	return c
}

// effective is the build's defaults overlaid with the assignment's
// settings, a secret one as a *Secret.
func effective(p placed, sl *sealer) (map[string]any, error) {
	out := make(map[string]any, len(p.m.Settings))
	for k, s := range p.m.Settings {
		if s.Default != nil {
			out[k] = *s.Default
		}
	}
	for k, v := range p.Settings {
		if p.m.Settings[k].Secret {
			out[k] = sl.setting(v, p.Salts[k])
		} else {
			out[k] = v
		}
	}
	for _, k := range p.m.SettingNames() {
		if _, set := out[k]; p.m.Settings[k].Required && !set {
			return nil, fmt.Errorf("setting %s of %s is required and not set on %s: mesh assign %s %s --set %s=VALUE", k, p.Module, p.Node, p.Node, p.Module, k)
		}
	}
	return out, nil
}

// needs says why a node cannot host a module: "postgres needs linux, web-1 has none".
func needs(p placed, n Node) string {
	if p.releasing != "" {
		return p.releasing
	}
	has := "none"
	if len(n.Capabilities) > 0 {
		has = strings.Join(n.Capabilities, ", ")
	}
	return fmt.Sprintf("%s needs %s, %s has %s", p.Module, strings.Join(p.missing, " and "), n.Name, has)
}

func plural(ps []placed) string {
	if len(ps) > 1 {
		return "s"
	}
	return ""
}

// templateError keeps what a person needs of text/template's error: "at
// <.Settings.port>: map has no entry for key "port"", not the prefix
// repeating the path the sentence already names.
func templateError(err error) string {
	s := err.Error()
	if i := strings.Index(s, " at <"); i >= 0 {
		return s[i+1:]
	}
	return strings.TrimPrefix(s, "template: ")
}

// boundedWriter stops a template past manifest.MaxRendered bytes: the
// template fails with errTooLarge, and the node cannot be composed, named
// with the bound, while the rest of the push goes on.
type boundedWriter struct {
	w    *bytes.Buffer
	left int
}

var errTooLarge = fmt.Errorf("it wrote over %d bytes, the most one file may hold", manifest.MaxRendered)

func (b *boundedWriter) Write(p []byte) (int, error) {
	if len(p) > b.left {
		return 0, errTooLarge
	}
	b.left -= len(p)
	return b.w.Write(p)
}

// peers are the nodes node must reach on the overlay (rule of issue 18):
// those whose modules its modules receive from, and those whose modules
// receive from its modules; never itself, each once, by name. A peer
// without an address yet is left out until it has one.
func (w *World) peers(node string) []Peer {
	seen := map[string]bool{node: true}
	add := func(other string) {
		if !seen[other] && w.node(other).Address != "" {
			seen[other] = true
		}
	}
	for _, p := range w.assigned(node) {
		if p.m == nil || p.err != nil || len(p.missing) > 0 {
			continue
		}
		for _, r := range p.m.Consumes {
			for _, pr := range w.choose(p, r).providers {
				add(pr.Node)
			}
		}
		for _, r := range p.m.Provides {
			for _, c := range w.consumers[r] {
				if w.choose(c, r).serves(p) {
					add(c.Node)
				}
			}
		}
	}
	delete(seen, node)
	out := make([]Peer, 0, len(seen))
	for _, name := range slices.Sorted(maps.Keys(seen)) {
		n := w.node(name)
		out = append(out, Peer{Node: name, Address: n.Address, Key: n.Key})
	}
	return out
}

// renderRun is p's run with its templated env values and probe target
// rendered for this node (manifest/runtemplate.go). A secret may not be
// read there: a program's environment and its probe travel in the
// declaration unsealed, and the agent shows them in its process table.
func (p placed) renderRun(r manifest.Run, data any, sl *sealer, buf *bytes.Buffer) (manifest.Run, error) {
	ts := r.Templates()
	if len(ts) == 0 {
		return r, nil
	}
	values := make(map[string]string, len(ts))
	for _, t := range ts {
		buf.Reset()
		sl.begin()
		if err := p.templates[runTemplateKey(t)].Execute(&boundedWriter{w: buf, left: manifest.MaxRendered}, data); err != nil {
			return r, fmt.Errorf("the %s of %s's run failed: %s", t.Name, p.Module, templateError(err))
		}
		if sl.read {
			return r, fmt.Errorf("the %s of %s's run reads a secret, which a program's environment and probe would carry unsealed; give it in a file resource the program reads", t.Name, p.Module)
		}
		values[t.Name] = buf.String()
	}
	out, err := r.Rendered(values)
	if err != nil {
		return r, fmt.Errorf("%s's run on this node: %w", p.Module, err)
	}
	return out, nil
}
