package world

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/meshctl/mesh/commands/secrets"
	"github.com/meshctl/mesh/compose"
	"github.com/meshctl/mesh/declaration"
	"github.com/meshctl/mesh/manifest"
	"github.com/meshctl/mesh/projections"
	"github.com/nats-io/nkeys"
)

// changedModules exchange requirements every way composition lets them: a
// provider that mints its consumers' credentials and lists them, one that
// needs a capability (so it can be blocked), consumers choosing by
// locality, by label and all of them, and a module that exchanges nothing.
var changedModules = []string{
	`{"module":"db","requires":["linux"],"provides":["db"],"provisions":["db"],"settings":{"port":{"default":"5432"}},"resources":[
	  {"kind":"file","path":"/etc/db.conf","mode":"0600","template":"{{.Node.Name}} {{.Settings.port}} {{range .Consumers}}{{.Node}}/{{.Module}}={{.Password}};{{end}} {{range .Peers}}{{.Node}}@{{.Address}};{{end}}"}]}`,
	`{"module":"cache","provides":["cache"],"settings":{"size":{"default":"1"}},"resources":[
	  {"kind":"file","path":"/etc/cache.conf","mode":"0644","template":"{{.Settings.size}} {{index .Node.Labels \"zone\"}}"}]}`,
	`{"module":"web","consumes":["db","cache"],"resources":[
	  {"kind":"file","path":"/etc/web.conf","mode":"0600","template":"{{.Receives.db.Node}}@{{.Receives.db.Address}}:{{.Receives.db.Settings.port}} {{index .Receives.db.Labels \"zone\"}} {{.Receives.db.Credential.Password}} {{.Receives.cache.Node}} {{.Receives.cache.Settings.size}} {{.Node.Facts.os}}"}]}`,
	`{"module":"zonal","consumes":["db"],"choose":{"db":{"label":"zone"}},"resources":[
	  {"kind":"file","path":"/etc/zonal.conf","mode":"0644","template":"{{.Receives.db.Node}}"}]}`,
	`{"module":"every","consumes":["db"],"choose":{"db":{"all":true}},"resources":[
	  {"kind":"file","path":"/etc/every.conf","mode":"0644","template":"{{range .Receives.db}}{{.Node}}:{{.Settings.port}};{{end}}"}]}`,
	`{"module":"motd","settings":{"message":{"default":"hi"}},"resources":[
	  {"kind":"file","path":"/etc/motd","mode":"0644","template":"{{.Settings.message}} {{.Node.Name}}"}]}`,
}

// Changed is sound: a node it leaves out composes to exactly what it did
// before the change. Random changes of every kind an input has (a node's
// labels, capabilities, facts, address or own keys; assigning, changing
// and unassigning modules; enrolling and retiring; a seat handed over;
// rotations and the network), each checked against composing every node
// again. It fails if Changed leaves out a node the change moved.
func TestChangedNamesEveryNodeWhoseCompositionMoved(t *testing.T) {
	t.Parallel()
	kp, err := nkeys.CreateAccount()
	if err != nil {
		t.Fatal(err)
	}
	keys, err := declaration.NewKeyring(kp)
	if err != nil {
		t.Fatal(err)
	}
	manifests := map[compose.BuildRef]manifest.Manifest{}
	builds := map[string][]string{}
	for _, text := range changedModules {
		m, err := manifest.Parse([]byte(text))
		if err != nil {
			t.Fatal(err)
		}
		manifests[compose.BuildRef{Module: m.Module, Build: m.Build()}] = m
		builds[m.Module] = append(builds[m.Module], m.Build())
		// A second build of each: an assignment may move to it.
		m2, err := manifest.Parse([]byte(text[:len(text)-2] + `,{"kind":"directory","path":"/var/` + m.Module + `","mode":"0755"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		manifests[compose.BuildRef{Module: m2.Module, Build: m2.Build()}] = m2
		builds[m.Module] = append(builds[m.Module], m2.Build())
	}
	modules := slices.Sorted(maps.Keys(builds))
	seals := curveKeys(t, 3) // X25519 keys a node may make
	rng := rand.New(rand.NewPCG(34, 3))
	pick := func(xs []string) string { return xs[rng.IntN(len(xs))] }
	zones := []string{"a", "b", "c"}

	// The input is kept as its parts, and made afresh for each step.
	type state struct {
		nodes   map[string]compose.Node
		assign  map[[2]string]compose.Assignment
		owned   map[string]projections.NodeKeys
		release map[string]string
		gens    map[compose.Pair]uint64
		network string
	}
	input := func(s state) compose.Input {
		in := compose.Input{Mesh: "m", Manifests: manifests, Network: s.network, Generations: maps.Clone(s.gens), Releasing: maps.Clone(s.release),
			Secrets: secrets.ComposeSecrets{Keys: keys, Owned: maps.Clone(s.owned)}}
		for _, name := range slices.Sorted(maps.Keys(s.nodes)) {
			in.Nodes = append(in.Nodes, s.nodes[name])
		}
		for _, k := range slices.SortedFunc(maps.Keys(s.assign), func(a, b [2]string) int {
			return slices.Compare(a[:], b[:])
		}) {
			if _, ok := s.nodes[k[0]]; ok {
				in.Assignments = append(in.Assignments, s.assign[k])
			}
		}
		return in
	}
	s := state{nodes: map[string]compose.Node{}, assign: map[[2]string]compose.Assignment{}, owned: map[string]projections.NodeKeys{},
		release: map[string]string{}, gens: map[compose.Pair]uint64{}}
	newNode := func(name string) compose.Node {
		n := compose.Node{Name: name, Labels: map[string]string{"zone": pick(zones)}, Facts: map[string]string{"os": "linux"}}
		if rng.IntN(4) > 0 {
			n.Capabilities = []string{"linux"}
		}
		return n
	}
	for i := range 14 {
		name := fmt.Sprintf("n-%02d", i)
		s.nodes[name] = newNode(name)
		s.assign[[2]string{name, pick(modules)}] = compose.Assignment{}
	}
	for k := range s.assign {
		s.assign[k] = compose.Assignment{Node: k[0], Module: k[1], Build: builds[k[1]][0], Settings: map[string]string{}}
	}
	nodeNames := func() []string { return slices.Sorted(maps.Keys(s.nodes)) }
	changes := []func() string{
		func() string { // labels
			n := pick(nodeNames())
			node := s.nodes[n]
			node.Labels = map[string]string{"zone": pick(zones)}
			s.nodes[n] = node
			return "labels of " + n
		},
		func() string { // capabilities
			n := pick(nodeNames())
			node := s.nodes[n]
			if len(node.Capabilities) > 0 {
				node.Capabilities = nil
			} else {
				node.Capabilities = []string{"linux"}
			}
			s.nodes[n] = node
			return "capabilities of " + n
		},
		func() string { // facts
			n := pick(nodeNames())
			node := s.nodes[n]
			node.Facts = map[string]string{"os": pick([]string{"linux", "bsd"})}
			s.nodes[n] = node
			return "facts of " + n
		},
		func() string { // address (and network)
			n := pick(nodeNames())
			node := s.nodes[n]
			node.Address = fmt.Sprintf("10.0.0.%d", rng.IntN(200)+1)
			s.nodes[n] = node
			return "address of " + n
		},
		func() string { // own keys
			n := pick(nodeNames())
			k := s.owned[n]
			k.Node, k.Seal = n, seals[rng.IntN(len(seals))]
			if rng.IntN(2) == 0 { // a re-key; else only its sealing key
				k.Overlay = fmt.Sprint("ov-", rng.IntN(1000))
				node := s.nodes[n]
				node.Key = k.Overlay
				s.nodes[n] = node
			}
			s.owned[n] = k
			return "keys of " + n
		},
		func() string { // assign or reassign
			n, m := pick(nodeNames()), pick(modules)
			settings := map[string]string{}
			switch m {
			case "db":
				settings["port"] = fmt.Sprint(5000 + rng.IntN(3))
			case "cache":
				settings["size"] = fmt.Sprint(rng.IntN(3))
			case "motd":
				settings["message"] = pick([]string{"hi", "bye"})
			}
			s.assign[[2]string{n, m}] = compose.Assignment{Node: n, Module: m, Build: pick(builds[m]), Settings: settings}
			return "assign " + m + " to " + n
		},
		func() string { // unassign
			ks := slices.Collect(maps.Keys(s.assign))
			if len(ks) == 0 {
				return "nothing"
			}
			k := ks[rng.IntN(len(ks))]
			delete(s.assign, k)
			return "unassign " + k[1] + " from " + k[0]
		},
		func() string { // enrol
			name := fmt.Sprintf("n-%02d", 14+rng.IntN(6))
			s.nodes[name] = newNode(name)
			return "enrol " + name
		},
		func() string { // retire
			if len(s.nodes) < 3 {
				return "nothing"
			}
			n := pick(nodeNames())
			delete(s.nodes, n)
			return "retire " + n
		},
		func() string { // a seat handed over, or no longer
			ks := slices.Collect(maps.Keys(s.assign))
			if len(ks) == 0 {
				return "nothing"
			}
			k := ks[rng.IntN(len(ks))]
			key := k[0] + "/" + k[1]
			if _, ok := s.release[key]; ok {
				delete(s.release, key)
			} else {
				s.release[key] = Releasing(k[1], "seat", "elsewhere")
			}
			return "seat of " + key
		},
		func() string { // a rotation: the whole mesh's
			s.gens[compose.Pair{Provider: "db", Consumer: pick([]string{"web", "zonal", "every"})}]++
			return "rotation"
		},
		func() string { // the network: the whole mesh's
			s.network = pick([]string{"", "10.0.0.0/24"})
			return "network " + s.network
		},
	}
	composeAll := func(in compose.Input) map[string]Would {
		w := compose.NewWorld(in)
		out := map[string]Would{}
		for _, n := range w.Nodes() {
			out[n] = Of(w.Compose(n))
		}
		return out
	}
	old := input(s)
	before := composeAll(old)
	left, moved := 0, 0
	for step := range 600 {
		what := changes[rng.IntN(len(changes))]()
		in := input(s)
		after := composeAll(in)
		changed, ok := Changed(old, in)
		for n, w := range after {
			if ok && !changed[n] {
				left++
				if !reflect.DeepEqual(before[n], w) {
					t.Fatalf("step %d (%s): Changed left out %s, whose composition moved:\nbefore %+v\nafter  %+v", step, what, n, before[n], w)
				}
			}
			if b, had := before[n]; !had || b.ContentDigest != w.ContentDigest {
				moved++
			}
		}
		old, before = in, after
	}
	// The test means something only if changes moved nodes and Changed
	// left some out: it composes few again, not every node every time.
	if moved == 0 || left == 0 {
		t.Fatalf("%d node(s) moved and %d were left out over the steps: the test proves nothing", moved, left)
	}
}

// Changed compares each field of a composition's input by name, so a field
// added to compose.Input, Node or Assignment would be left out of it
// silently, and status would keep a node's old composition when only that
// field moved. This lists every field Changed knows: a new one fails here
// until Changed compares it (as one node's, or the whole mesh's).
func TestChangedKnowsEveryFieldOfTheInput(t *testing.T) {
	known := map[string][]string{
		// Sorted is no part of what a node is composed to, only of how
		// the lists are ordered: Changed walks them in order either way.
		"Input":      {"Mesh", "Nodes", "Assignments", "Manifests", "Secrets", "Generations", "Overlapping", "Network", "Releasing", "Artifacts", "Sorted"},
		"Node":       {"Name", "Capabilities", "Labels", "Facts", "Address", "Key"},
		"Assignment": {"Node", "Module", "Build", "Settings", "Salts", "Problem"},
		// Keys and Secrets by identity (sameSealers), Owned node by node (keysOf).
		"ComposeSecrets": {"Keys", "Owned", "Secrets"},
	}
	for _, typ := range []reflect.Type{reflect.TypeFor[compose.Input](), reflect.TypeFor[compose.Node](), reflect.TypeFor[compose.Assignment](), reflect.TypeFor[secrets.ComposeSecrets]()} {
		var fields []string
		for f := range typ.Fields() {
			fields = append(fields, f.Name)
		}
		if !slices.Equal(fields, known[typ.Name()]) {
			t.Errorf("%s has the fields %v; Changed (changed.go) compares %v: make it compare each new field, then list it here", typ, fields, known[typ.Name()])
		}
	}
}

// curveKeys are n public X25519 keys, as a node makes them.
func curveKeys(t *testing.T, n int) []string {
	var out []string
	for range n {
		k, err := nkeys.CreateCurveKeys()
		if err != nil {
			t.Fatal(err)
		}
		pub, err := k.PublicKey()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, pub)
	}
	return out
}
