package world

import (
	"context"
	"encoding/binary"
	"fmt"
	"maps"

	"slices"
	"sync"
	"time"

	"github.com/meshctl/mesh/aggregates"
	"github.com/meshctl/mesh/commands/core"
	"github.com/meshctl/mesh/commands/secrets"
	"github.com/meshctl/mesh/fanout"

	"github.com/meshctl/mesh/compose"
	"github.com/meshctl/mesh/manifest"
	"github.com/meshctl/mesh/projections"
	"github.com/meshctl/mesh/secret"
)

// Composer answers what each node would be sent, composed from one
// consistent view of the read models, and keeps what it can between
// compositions: parsed manifests (by build, which never go stale) and the
// last composition of every node (by the read models' composition version).
type Composer struct {
	*core.Core
	manifests manifests
	composed  composedCache
	worlds    worldCache
}

// worldCache holds the world a push indexed, by the composition version of
// the view it was read from. Every event that can change what a node is
// composed to moves that version (events.MovesComposition), so the world
// of a version is the world of any view at it; reading and indexing
// composition's input again (every node, assignment, key and fact) was
// about 4 µs a node of every push though nothing had moved. One world is
// kept, the newest: a few megabytes at ten thousand nodes.
type worldCache struct {
	mu      sync.Mutex
	secrets *secrets.Store // the world's, which a test may replace
	at      At
}

// At is one world and what it is kept by: the composition version of the
// view it was read from and the secrets' count of dropped salts then (a
// forget learnt from another controller moves no composition version
// here, and a world indexed before it still held the forgotten value
// opened: TestForgettingASecret waited 30 s). Input is what it indexed,
// which the next version's composition is compared with (changed.go).
type At struct {
	World            *compose.World
	Input            compose.Input
	Version, Forgets uint64
	// patchedFrom, when not 0, is the version whose input this one's
	// patched, changing only the nodes of touched (patch.go): what the
	// would-sends of that version are told apart from by those alone.
	patchedFrom uint64
	touched     map[string]bool
}

// At is the world of v's composition version, with what it is kept by:
// the one indexed last if the version has not moved since, else one
// indexed from v (and kept).
func (h *Composer) At(v *projections.View) (At, error) {
	version := v.CompositionVersion()
	// Read before the input is: a forget during indexing leaves the world
	// kept at the count before it, so the next call indexes again.
	forgets := h.Secrets.Forgets()
	h.worlds.mu.Lock()
	at := h.worlds.at
	sameSecrets := h.worlds.secrets == h.Secrets
	hit := at.World != nil && at.Version == version && sameSecrets && at.Forgets == forgets
	if !hit && at.World != nil && version > at.Version {
		// An older world is let go before the newer is read and indexed,
		// not held beside it meanwhile: 20 MB at 100,000 nodes, at the
		// peak of the status after a composition change (issue 34's
		// 700 MiB bound). A caller still at the older version indexes it
		// again. The composition cache keeps the older input Changed reads.
		// A patch of it (patch.go) holds it meanwhile, but shares all
		// it did not change.
		h.worlds.at = At{}
	}
	h.worlds.mu.Unlock()
	if hit {
		return at, nil
	}
	if patched, ok, err := h.patch(v, at, version, forgets, sameSecrets); err != nil || ok {
		return patched, err
	}
	at = At{} // nor held here
	in, err := h.Input(v)
	if err != nil {
		return At{}, err
	}
	return h.keep(At{World: compose.NewWorld(in), Input: in, Version: version, Forgets: forgets}), nil
}

// keep keeps at as the newest world, unless one newer is kept already,
// and answers it.
func (h *Composer) keep(at At) At {
	h.worlds.mu.Lock()
	defer h.worlds.mu.Unlock()
	if h.worlds.at.World == nil || at.Version >= h.worlds.at.Version {
		h.worlds.secrets, h.worlds.at = h.Secrets, at
	}
	return at
}

// New is a Composer over c, its caches empty.
func New(c *core.Core) *Composer { return &Composer{Core: c} }

// manifests caches parsed manifests by build. A build is the digest of its
// content, so an entry can never go stale: the cache only saves parsing.
type manifests struct {
	mu sync.Mutex
	m  map[compose.BuildRef]manifest.Manifest
}

// Manifest is the manifest of a build the catalogue holds (found false
// when it holds none), parsed once.
func (h *Composer) Manifest(v *projections.View, ref compose.BuildRef) (manifest.Manifest, bool, error) {
	return h.manifests.get(v, ref)
}

func (c *manifests) get(v *projections.View, ref compose.BuildRef) (manifest.Manifest, bool, error) {
	c.mu.Lock()
	m, ok := c.m[ref]
	c.mu.Unlock()
	if ok {
		return m, true, nil
	}
	raw, found, err := v.Manifest(ref.Module, ref.Build)
	if err != nil || !found {
		return manifest.Manifest{}, false, err
	}
	if m, err = manifest.Parse(raw); err != nil {
		return manifest.Manifest{}, false, fmt.Errorf("the catalogue's build %s of %s does not parse: %w", manifest.ShortBuild(ref.Build), ref.Module, err)
	}
	c.mu.Lock()
	if c.m == nil {
		c.m = map[compose.BuildRef]manifest.Manifest{}
	}
	c.m[ref] = m
	c.mu.Unlock()
	return m, true, nil
}

// Input gathers composition's input from one view of the read models:
// active nodes, their assignments, and the manifests those name.
func (h *Composer) Input(v *projections.View) (compose.Input, error) {
	in := compose.Input{Mesh: h.Mesh, Manifests: map[compose.BuildRef]manifest.Manifest{}}
	var owned map[string]projections.NodeKeys
	if h.Keys != nil {
		var err error
		if owned, err = v.AllNodeKeys(); err != nil {
			return in, err
		}
		in.Secrets = secrets.ComposeSecrets{Keys: h.Keys, Owned: owned, Secrets: h.Secrets}
	}
	nodes, err := v.Nodes()
	if err != nil {
		return in, err
	}
	facts, err := v.AllFacts()
	if err != nil {
		return in, err
	}
	hasNetwork, err := h.meshWide(v, &in)
	if err != nil {
		return in, err
	}
	var addresses map[string]string
	if hasNetwork {
		if addresses, err = v.NodeAddresses(); err != nil {
			return in, err
		}
	}
	// Sized once: grown a node and an assignment at a time, the lists and
	// the set were a third of reading the input at 100,000 nodes, read
	// again after every composition change (issue 34).
	active := make(map[string]bool, len(nodes))
	in.Nodes = make([]compose.Node, 0, len(nodes))
	var same shared
	for _, n := range nodes {
		if n.Retired {
			continue
		}
		active[n.Name] = true
		f, hasFacts := facts[n.Name]
		in.Nodes = append(in.Nodes, h.nodeOf(n, addresses[n.Name], owned, f, hasFacts, &same))
	}
	rows, err := v.Assignments()
	if err != nil {
		return in, err
	}
	in.Assignments = make([]compose.Assignment, 0, len(rows))
	for _, a := range rows {
		if active[a.Node] {
			in.Assignments = append(in.Assignments, h.assignmentOf(v, a, in.Manifests))
		}
	}
	h.openAll(in.Assignments)
	// Checked once here, where the lists are read whole, rather than at
	// every patch of them (compose.Input.Sorted).
	in.Sorted = in.InOrder()
	return in, nil
}

// nodeOf is a node's row as composition reads it, with its address, the
// keys it made (owned), and what its agent detected (f, when hasFacts).
func (h *Composer) nodeOf(n projections.Node, address string, owned map[string]projections.NodeKeys, f projections.Facts, hasFacts bool, same *shared) compose.Node {
	cn := compose.Node{Name: n.Name, Capabilities: same.list(n.Capabilities), Labels: same.labels(n.Labels), Facts: map[string]string{}}
	if address != "" && h.Keys != nil {
		cn.Address, cn.Key = address, h.Keys.NodeOverlayPublic(n.Name)
		if k, ok := owned[n.Name]; ok {
			cn.Key = k.Overlay // made on the node (issue 29)
		}
	}
	if hasFacts {
		cn.Capabilities = same.list(union(n.Capabilities, f.Capabilities))
		cn.Facts = f.Facts
	}
	return cn
}

// assignmentOf is an assignment row as composition reads it (its sealed
// settings not yet opened: openAll), its build's manifest put in
// manifests when the catalogue has it.
func (h *Composer) assignmentOf(v *projections.View, a projections.AssignmentRow, manifests map[compose.BuildRef]manifest.Manifest) compose.Assignment {
	ref := compose.BuildRef{Module: a.Module, Build: a.Build}
	if _, done := manifests[ref]; !done {
		m, found, err := h.manifests.get(v, ref)
		if err != nil {
			h.Log.Warn(err.Error()) // composition names the build as missing, for that node only
		} else if found {
			manifests[ref] = m
		}
	}
	return compose.Assignment{Node: a.Node, Module: a.Module, Build: a.Build, Settings: a.Settings}
}

// meshWide reads the parts of composition's input that are no node's
// (the network's range, the artifacts, the seats being handed over, the
// rotations) into in, and says whether the mesh has a network: a handful
// of rows, which a patched input reads again whole (patch.go).
func (h *Composer) meshWide(v *projections.View, in *compose.Input) (hasNetwork bool, err error) {
	network, hasNetwork, err := v.Network()
	if err != nil {
		return false, err
	}
	in.Network = ""
	if hasNetwork {
		in.Network = network.CIDR
	}
	if in.Artifacts, err = v.ArtifactSizes(); err != nil {
		return false, err
	}
	seats, err := v.Seats()
	if err != nil {
		return false, err
	}
	in.Releasing = nil
	for _, s := range seats {
		if s.HandoverTo != "" {
			if in.Releasing == nil {
				in.Releasing = map[string]string{}
			}
			in.Releasing[s.Node+"/"+s.Module] = Releasing(s.Module, s.Seat, s.HandoverTo)
		}
	}
	rotations, err := v.Rotations()
	if err != nil {
		return false, err
	}
	in.Generations, in.Overlapping = nil, nil
	for _, r := range rotations {
		if in.Generations == nil {
			in.Generations = map[compose.Pair]uint64{}
		}
		pair := compose.Pair{Provider: r.Provider, Consumer: r.Consumer}
		in.Generations[pair] = r.Generation
		if r.Overlapping() {
			if in.Overlapping == nil {
				in.Overlapping = map[compose.Pair]bool{}
			}
			in.Overlapping[pair] = true
		}
	}
	return hasNetwork, nil
}

// shared hands out one list or map of labels for equal ones, which
// composition reads and never changes: a fleet's nodes mostly have the
// same capabilities and labels, and a map of labels a node was 30 MB of a
// kept input at 100,000 nodes (issue 34's 700 MiB bound). Its key is
// built on a reused buffer: a string of it is made only for a new one.
type shared struct {
	buf        []byte
	seenLists  map[string][]string
	seenLabels map[string]map[string]string
}

// A nil list or map is not shared: it stays nil, as the row had it.
func (s *shared) list(l []string) []string {
	if l == nil {
		return nil
	}
	s.buf = s.buf[:0]
	for _, x := range l {
		s.buf = appendLen(s.buf, x)
	}
	if got, ok := s.seenLists[string(s.buf)]; ok {
		return got
	}
	if s.seenLists == nil {
		s.seenLists = map[string][]string{}
	}
	s.seenLists[string(s.buf)] = l
	return l
}

func (s *shared) labels(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	s.buf = s.buf[:0]
	for _, k := range slices.Sorted(maps.Keys(m)) {
		s.buf = appendLen(appendLen(s.buf, k), m[k])
	}
	if got, ok := s.seenLabels[string(s.buf)]; ok {
		return got
	}
	if s.seenLabels == nil {
		s.seenLabels = map[string]map[string]string{}
	}
	s.seenLabels[string(s.buf)] = m
	return m
}

// appendLen appends x with its length before it: no two lists or maps
// have the same key, whatever bytes their strings hold.
func appendLen(b []byte, x string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(x))), x...)
}

// union is a and b, sorted, each once.
func union(a, b []string) []string {
	out := slices.Concat(a, b)
	slices.Sort(out)
	return slices.Compact(out)
}

// openersInFlight is how many sealed settings are opened at once.
const openersInFlight = 32

// openAll opens every sealed setting of as. A setting whose key is not yet
// known is one read of the bus (its salt): the first composition after a
// start needs ten thousand, which are read in one scan of the secrets
// stream, or, when few, many at a time.
func (h *Composer) openAll(as []compose.Assignment) {
	if h.Secrets != nil {
		var ids []string
		for _, a := range as {
			for _, v := range a.Settings {
				if s, err := secret.ParseSetting(v); err == nil {
					ids = append(ids, s.Key)
				}
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if err := h.Secrets.Preload(ctx, ids); err != nil {
			h.Log.Warn("cannot read the secrets stream in one scan; reading each salt instead", "err", err)
		}
		cancel()
	}
	fanout.Each(len(as), openersInFlight, func(i int) { h.Secrets.OpenSettings(&as[i]) })
}

// Releasing is why a module is left out of its node's declaration while
// the seat it holds is handed over.
func Releasing(module, seat, to string) string {
	return fmt.Sprintf("%s lets seat %s go: it is being handed over to %s", module, seat, to)
}

// World composes from one consistent view of the read models.
func (h *Composer) World() (*compose.World, error) {
	var in compose.Input
	err := h.Proj.Read(func(v *projections.View) (err error) {
		in, err = h.Input(v)
		return err
	})
	if err != nil {
		return nil, err
	}
	return compose.NewWorld(in), nil
}

// BuildOf resolves the build an operator names for a module (its full
// digest or the short form lists show; "" is the latest) and reads its
// manifest. A module or build the catalogue lacks is refused as op, with
// where to look.
func (h *Composer) BuildOf(v *projections.View, op, module, want string) (string, manifest.Manifest, error) {
	row, found, err := v.Module(module)
	if err != nil {
		return "", manifest.Manifest{}, err
	}
	if !found {
		return "", manifest.Manifest{}, aggregates.Refuse(op, module, aggregates.ErrUnknownModule, "no module of that name is registered; see mesh module list")
	}
	build := row.Latest
	if want != "" {
		build = ""
		for _, b := range row.Builds {
			if b.Build == want || manifest.ShortBuild(b.Build) == want {
				build = b.Build
			}
		}
		if build == "" {
			return "", manifest.Manifest{}, aggregates.Refuse(op, module, aggregates.ErrInvalid, fmt.Sprintf("it has no build %s; mesh module show %s lists its builds", want, module))
		}
	}
	m, found, err := h.manifests.get(v, compose.BuildRef{Module: module, Build: build})
	if err == nil && !found {
		err = fmt.Errorf("build %s of %s cannot be read from the catalogue", manifest.ShortBuild(build), module)
	}
	return build, m, err
}
