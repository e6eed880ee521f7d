package compose

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	"github.com/meshctl/mesh/manifest"
)

// Declaration is everything one node should be: the content a node is sent,
// before the envelope of sequence, chain and time is put around it.
type Declaration struct {
	Mesh      string        `json:"mesh"`
	Node      string        `json:"node"`
	Modules   []ModuleBuild `json:"modules"`
	Resources []Resource    `json:"resources"`
	Receives  []Receipt     `json:"receives"`
	// Runs are the programs of its modules that run, by module. Omitted
	// when none, so a declaration of files alone keeps its digest.
	Runs []Runtime `json:"runs,omitempty"`
	// Network is the node's place on the mesh's overlay: omitted while the
	// mesh has none, so a mesh without a network keeps its digests.
	Network *Network `json:"network,omitempty"`
}

// Network is a node's place on the overlay (issue 18): its address and
// public key, the range, and its peers: the nodes whose modules it
// receives from and the nodes that receive from its modules, each with
// its address and public key. The private key is never here: the node's
// agent derives it from its join string (declaration.OverlayKey), and a
// file that prints it (.Network.PrivateKey) is sealed to the node.
type Network struct {
	Range   string `json:"range"`
	Address string `json:"address"`
	Key     string `json:"key"`
	Peers   []Peer `json:"peers"`
}

// Peer is one node a node must reach on the overlay.
type Peer struct {
	Node    string `json:"node"`
	Address string `json:"address"`
	Key     string `json:"key"`
}

// Runtime is one module's program as a declaration carries it (its
// manifest's run): what the node's agent starts and supervises.
type Runtime struct {
	Module  string            `json:"module"`
	Command string            `json:"command"`
	Args    []string          `json:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	Dir     string            `json:"dir,omitempty"`
	User    string            `json:"user,omitempty"`
	// Health is the manifest's check, defaults filled in, which the agent
	// runs against the program; omitted when none, so a declaration of a
	// program without a check has the bytes it had before checks existed.
	Health *manifest.Health `json:"health,omitempty"`
	// Digest is the artifact the program is, when Command is the path of
	// one of its module's artifact resources (issue 32): a new digest is
	// a new program. The agent then runs that path under its root.
	Digest string `json:"digest,omitempty"`
}

// ModuleBuild is one module the declaration holds, and which build.
type ModuleBuild struct {
	Module string `json:"module"`
	Build  string `json:"build"`
}

// Resource is one rendered resource. Module says which module owns it, so
// that a node can drop exactly what the mesh gave it when it is taken away.
type Resource struct {
	Path    string  `json:"path"`
	Kind    string  `json:"kind"`
	Mode    string  `json:"mode"`
	Content *string `json:"content,omitempty"`
	Module  string  `json:"module"`
	Sealed  *Sealed `json:"sealed,omitempty"` // in place of Content when it holds a secret
	// Artifact, Digest and Size are an artifact resource's (issue 32):
	// the name it was put under, the sha256 of exactly the bytes the node
	// is to write, which the controller's signature covers, and their
	// length. Omitted for other kinds, whose declarations keep their
	// digests.
	Artifact string `json:"artifact,omitempty"`
	Digest   string `json:"digest,omitempty"`
	Size     int64  `json:"size,omitempty"`
}

// Receipt is what one consumer receives for one requirement: the module
// providing it and the node that module is on.
type Receipt struct {
	Consumer    string `json:"consumer"`
	Requirement string `json:"requirement"`
	Node        string `json:"node"`
	Module      string `json:"module"`
}

// Canonical is the declaration's one byte form: fixed field order, lists
// sorted by composition, no insignificant white space, no HTML escaping (a
// config file's "<" stays "<"). Every list is non-nil, so an empty
// declaration is `[]`, not `null`, and has one form too.
//
// A sealed resource is written with its MAC and without its box or keys:
// the box is new at every seal, and the content digest must say "the same"
// of the same content (rule 4), however it was sealed.
func (d Declaration) Canonical() []byte {
	for i, r := range d.Resources {
		if r.Sealed != nil && r.Sealed.Box != "" {
			d.Resources = unboxed(d.Resources, i)
			break
		}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	// Only strings and slices of structs of strings: it always encodes.
	_ = enc.Encode(d)
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// Digest is the hex sha256 of exactly b.
func Digest(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// DigestIs says whether digest is Digest(b), without making Digest's
// string: the fold holds every send's recorded digest to its bytes so
// (package provenance), and the string was an allocation an event.
func DigestIs(b []byte, digest string) bool {
	sum := sha256.Sum256(b)
	var text [2 * sha256.Size]byte
	hex.Encode(text[:], sum[:])
	return string(text[:]) == digest
}

// unboxed copies resources from the first sealed one at i on, without boxes.
func unboxed(rs []Resource, i int) []Resource {
	out := append([]Resource(nil), rs...)
	for ; i < len(out); i++ {
		if s := out[i].Sealed; s != nil {
			out[i].Sealed = &Sealed{MAC: s.MAC}
		}
	}
	return out
}
