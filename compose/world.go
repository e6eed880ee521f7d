package compose

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"text/template"

	"github.com/meshctl/mesh/manifest"
)

// Input is a snapshot of the read models, as composition needs it.
type Input struct {
	Mesh        string
	Nodes       []Node       // enrolled and not retired
	Assignments []Assignment // of those nodes
	Manifests   map[BuildRef]manifest.Manifest
	// Secrets seals files that hold a secret and mints credentials; nil
	// composes no secret.
	Secrets Secrets
	// Generations is where the last rotation of each provider and consumer
	// left their credentials (0 where none did).
	Generations map[Pair]uint64
	// Overlapping are the pairs whose last rotation's overlap is open: a
	// provider's .Consumers entry for such a consumer carries the
	// previous generation's credential as .Previous, so the provider
	// accepts both while a consumer end away from the bus still holds the
	// old one. The consumer is only ever given the current generation.
	Overlapping map[Pair]bool
	// Network is the overlay's range ("" while the mesh has none); each
	// node's address and public key are on its Node.
	Network string
	// Releasing are the module instances ("node/module") whose seat is
	// being handed over, with why: each is left out of its node (the
	// holder lets the seat go before the next takes it), and nothing
	// resolves to it meanwhile.
	Releasing map[string]string
	// Artifacts are the digests the bucket holds by the log, with their
	// sizes (issue 32): an artifact resource composes to its digest and
	// size, and one naming a digest not here is the node's problem.
	Artifacts map[string]int64
	// Sorted says Nodes are in their names' order and Assignments in
	// their nodes' (strings.Compare), as the read models list them. A
	// patch (World.Patch, and commands/world's of an input) splices a
	// node's entries in by that order; checking the lists whole at every
	// patch (100,000 nodes once and as many assignments twice) was a
	// tenth of the first status after a label change (issue 34). Set
	// only by one who checked (commands/world's Input) or kept the order
	// (its patch); false makes a patch check the lists itself.
	Sorted bool
}

// InOrder says whether in's lists are in the order Sorted names, whatever
// Sorted says.
func (in Input) InOrder() bool {
	return slices.IsSortedFunc(in.Nodes, func(a, b Node) int { return strings.Compare(a.Name, b.Name) }) &&
		slices.IsSortedFunc(in.Assignments, func(a, b Assignment) int { return strings.Compare(a.Node, b.Node) })
}

// Node is a machine as templates see it.
type Node struct {
	Name string
	// Capabilities are the operator's declared ones and those the node's
	// agent detected, together: a module's requires is met by either.
	Capabilities []string
	Labels       map[string]string
	// Facts are what the node's agent detected of its machine (os, arch,
	// ...): templates read .Node.Facts.os. Empty until it reports.
	Facts map[string]string
	// Address and Key are its overlay address and public key ("" before
	// the network is set).
	Address, Key string
}

// Assignment is one module on one node, with the settings the operator gave.
// Secret settings are here in clear, opened for this composition only.
type Assignment struct {
	Node, Module, Build string
	Settings            map[string]string
	// Salts name the salt each secret setting is sealed under in the log:
	// a file that prints one is sealed under a key made of it, so that
	// forgetting the setting forgets the file (compose.Sealed).
	Salts map[string]string
	// Problem, when set, is why the assignment cannot be composed (a
	// secret setting that no longer opens), named as the node's problem.
	Problem string
}

// NodeName is n's name: the key nodes are listed by (RunOf).
func NodeName(n Node) string { return n.Name }

// AssignedNode is a's node: the key assignments are listed by (RunOf).
func AssignedNode(a Assignment) string { return a.Node }

// Same says whether a and b are the same assignment: node, module, build,
// settings (opened), salts and problem.
func (a Assignment) Same(b Assignment) bool {
	return a.Node == b.Node && a.Module == b.Module && a.Build == b.Build && a.Problem == b.Problem &&
		maps.Equal(a.Settings, b.Settings) && maps.Equal(a.Salts, b.Salts)
}

// BuildRef names one build of one module.
type BuildRef struct{ Module, Build string }

// World is an Input indexed for composing: assignments by node, providers by
// requirement, templates parsed once per build. Building it is the only
// work shared between nodes; Compose reads it and never changes it.
//
// It holds each node once: the input's list of nodes is shared, not
// copied, and every node's assignments are one run of one list, found by
// one map of names (at). Each in a map of its own (a Node, a slice of
// placed assignments a node) it was 54-65 MB at 100,000 nodes, beside the
// 24 MB input it copied, kept for as long as the world is (issue 34's
// 700 MiB bound); TestWorldSharesItsInputsNodes holds it so.
type World struct {
	mesh      string
	nodes     []Node
	at        map[string]int32    // node -> its index in nodes
	runs      []run               // by node index: its run of placed
	placed    []placed            // by node, then module
	providers map[string][]placed // requirement -> hostable providers, sorted
	blocked   map[string][]placed // requirement -> providers left out of their node
	consumers map[string][]placed // requirement -> hostable consumers, sorted
	secrets   Secrets
	gens      map[Pair]uint64
	overlap   map[Pair]bool
	network   string
	artifacts map[string]int64
	// releasing is the input's, read into each placed: a patch of an
	// input releasing otherwise indexes afresh (patch.go).
	releasing map[string]string
	// builds is each build's one manifest and templates, parsed once
	// (pointed to by each of its assignments: a copy taken a loop turn
	// escaped, one manifest an assignment, was 20 MB at 100,000 nodes).
	builds map[BuildRef]built
}

// run is where one node's assignments are in placed.
type run struct{ lo, hi int32 }

// built is one build as every assignment of it reads it: its manifest,
// its templates parsed, or why they do not parse.
type built struct {
	m         *manifest.Manifest
	templates map[string]*template.Template
	err       error
}

// node is name's node, and the zero Node when the world has no such node.
func (w *World) node(name string) Node {
	if i, ok := w.at[name]; ok {
		return w.nodes[i]
	}
	return Node{}
}

// assigned are node's assignments, by module.
func (w *World) assigned(node string) []placed {
	i, ok := w.at[node]
	if !ok {
		return nil
	}
	r := w.runs[i]
	return w.placed[r.lo:r.hi]
}

// placed is an assignment with its manifest and what it lacks on its node.
type placed struct {
	Assignment
	m         *manifest.Manifest
	missing   []string // capabilities the node lacks; empty when hostable
	releasing string   // why its seat is being handed over; "" when not
	templates map[string]*template.Template
	err       error // the build is not in the catalogue or a template will not parse
}

// NewWorld indexes in. It is deterministic: every list it keeps is sorted.
func NewWorld(in Input) *World {
	w := &World{mesh: in.Mesh, nodes: in.Nodes, at: make(map[string]int32, len(in.Nodes)),
		providers: map[string][]placed{}, blocked: map[string][]placed{}, consumers: map[string][]placed{},
		secrets: in.Secrets, gens: in.Generations, overlap: in.Overlapping, network: in.Network, artifacts: in.Artifacts,
		releasing: in.Releasing, builds: buildsOf(in.Manifests, nil)}
	for i, n := range in.Nodes {
		w.at[n.Name] = int32(i)
	}
	w.placed = make([]placed, 0, len(in.Assignments))
	for _, a := range in.Assignments {
		i, ok := w.at[a.Node]
		if !ok {
			continue // a retired or unknown node holds nothing
		}
		p := w.place(a, w.nodes[i])
		w.placed = append(w.placed, p)
		w.index(p)
	}
	for _, m := range []map[string][]placed{w.providers, w.blocked, w.consumers} {
		for k := range m {
			slices.SortFunc(m[k], byPlace)
		}
	}
	// The read models list assignments by node and module already; an
	// input made otherwise is sorted (stably: the order of a node's two
	// assignments of one module stays the input's, as it was).
	if !slices.IsSortedFunc(w.placed, byPlace) {
		slices.SortStableFunc(w.placed, byPlace)
	}
	w.runs = runsOf(w.nodes, w.at, w.placed)
	return w
}

func byPlace(a, b placed) int {
	if c := strings.Compare(a.Node, b.Node); c != 0 {
		return c
	}
	return strings.Compare(a.Module, b.Module)
}

// buildsOf is each build of manifests parsed, taking what old parsed
// already (a build is its content: the same build parses the same).
func buildsOf(manifests map[BuildRef]manifest.Manifest, old map[BuildRef]built) map[BuildRef]built {
	out := make(map[BuildRef]built, len(manifests))
	for ref, m := range manifests {
		if b, ok := old[ref]; ok {
			out[ref] = b
			continue
		}
		b := built{m: &m}
		// Every assignment of a build whose template does not parse
		// names it: the first alone did, and the rest composed
		// without their templates.
		b.templates, b.err = parseTemplates(m)
		out[ref] = b
	}
	return out
}

// place is a on node, with its build and what the node lacks for it.
func (w *World) place(a Assignment, node Node) placed {
	p := placed{Assignment: a, releasing: w.releasing[a.Node+"/"+a.Module]}
	if b, ok := w.builds[BuildRef{a.Module, a.Build}]; ok {
		p.m, p.templates, p.err = b.m, b.templates, b.err
		p.missing = missingCapabilities(b.m.Requires, node.Capabilities)
	} else {
		p.err = fmt.Errorf("build %s of %s is not in the catalogue", manifest.ShortBuild(a.Build), a.Module)
	}
	if a.Problem != "" && p.err == nil {
		p.err = errors.New(a.Problem)
	}
	return p
}

// index lists p under each requirement it consumes or provides.
func (w *World) index(p placed) {
	if p.m == nil {
		return
	}
	for _, r := range p.m.Consumes {
		if len(p.missing) == 0 && p.err == nil && p.releasing == "" {
			w.consumers[r] = append(w.consumers[r], p)
		}
	}
	for _, r := range p.m.Provides {
		if len(p.missing) == 0 && p.releasing == "" {
			w.providers[r] = append(w.providers[r], p)
		} else {
			w.blocked[r] = append(w.blocked[r], p)
		}
	}
}

// runsOf finds each node's run of placed (sorted by node). Nodes listed by
// name, as the read models list them, are walked beside placed; a map
// write a node was a tenth of indexing a world at 100,000 nodes.
func runsOf(nodes []Node, at map[string]int32, placed []placed) []run {
	runs := make([]run, len(nodes))
	sorted := slices.IsSortedFunc(nodes, func(a, b Node) int { return strings.Compare(a.Name, b.Name) })
	i := 0
	for lo := 0; lo < len(placed); {
		hi := lo + 1
		for hi < len(placed) && placed[hi].Node == placed[lo].Node {
			hi++
		}
		name := placed[lo].Node
		if sorted {
			for i < len(nodes) && nodes[i].Name < name {
				i++
			}
			if i < len(nodes) && nodes[i].Name == name {
				runs[i] = run{int32(lo), int32(hi)}
			}
		} else if j, ok := at[name]; ok {
			runs[j] = run{int32(lo), int32(hi)}
		}
		lo = hi
	}
	return runs
}

// Has says whether the world can compose node (it is active).
func (w *World) Has(node string) bool {
	_, ok := w.at[node]
	return ok
}

// Nodes lists the nodes the world can compose, by name, each once.
func (w *World) Nodes() []string {
	names := make([]string, 0, len(w.at))
	for n := range w.at {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

func parseTemplates(m manifest.Manifest) (map[string]*template.Template, error) {
	out := map[string]*template.Template{}
	for _, r := range m.Resources {
		if r.Template == nil {
			continue
		}
		t, err := manifest.ParseTemplate(r.Path, *r.Template)
		if err != nil {
			return nil, fmt.Errorf("the template of %s in %s does not parse: %v", r.Path, m.Module, err)
		}
		out[r.Path] = t
	}
	if m.Run != nil {
		for _, rt := range m.Run.Templates() {
			t, err := manifest.ParseRunTemplate(rt)
			if err != nil {
				return nil, fmt.Errorf("the run of %s does not parse: %v", m.Module, err)
			}
			out[runTemplateKey(rt)] = t
		}
	}
	return out, nil
}

// runTemplateKey is where a run's template is kept among a build's
// parsed templates: no resource path (always absolute) is like it.
func runTemplateKey(t manifest.RunTemplate) string { return "run " + t.Name }

func missingCapabilities(requires, has []string) []string {
	var missing []string
	for _, r := range requires {
		if !slices.Contains(has, r) {
			missing = append(missing, r)
		}
	}
	return missing
}
