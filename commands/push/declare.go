package push

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/meshctl/mesh/commands/core"

	"github.com/meshctl/mesh/aggregates"
	"github.com/meshctl/mesh/compose"
	"github.com/meshctl/mesh/declaration"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/manifest"
	"github.com/meshctl/mesh/projections"
	"github.com/meshctl/mesh/wire"
)

// declaredModule owns resources of a hand-written declaration that name no module.
const declaredModule = "declared"

// body is what a hand-written declaration file holds.
type body struct {
	Resources []compose.Resource `json:"resources"`
	Receives  []compose.Receipt  `json:"receives"`
}

// Declare sends a hand-written declaration: numbered, chained and signed
// like any other and recorded as sent by "declare", with its builds unknown,
// so nothing reads it as what the mesh would compose (rule 13).
func (h *Service) Declare(ctx context.Context, r wire.DeclareRequest) (wire.PushedNode, error) {
	if err := h.Writable(); err != nil {
		return wire.PushedNode{}, err
	}
	if err := h.ActiveNode(ctx, "declare to", r.Node); err != nil {
		return wire.PushedNode{}, err
	}
	content, err := parseBody(h.Mesh, r.Node, r.File, r.Body)
	if err != nil {
		return wire.PushedNode{}, err
	}
	if err := h.sizeArtifacts(r.File, &content); err != nil {
		return wire.PushedNode{}, err
	}
	var ev events.DeclarationSent
	var seq uint64
	// Numbered and chained on the node's row as read, expecting its
	// version: after a conflict (a push, an assignment), caught up and
	// sealed again on the row that holds it. Each attempt has a command id
	// of its own (PerNode), as a push's rounds do.
	err = core.DecideAndAppend(ctx, "declare to", r.Node, h.CatchUp, func(attempt int) error {
		row, _, err := h.Proj.Node(r.Node)
		if err != nil {
			return err
		}
		ev, _ = h.Seal(content, row, "declare", h.Now())
		seq, err = h.Store.Append(ctx, events.NodeAggregate(r.Node), row.Version, core.PerNode(r.CommandID, r.Node, attempt), ev)
		return err
	})
	if err != nil {
		return wire.PushedNode{}, err
	}
	h.Log.Info("declared", "node", r.Node, "sequence", ev.Sequence, "seq", seq)
	return wire.PushedNode{Node: r.Node, Sequence: ev.Sequence, Digest: ev.Digest, Resources: ev.Resources, StreamSeq: seq}, h.Landed(ctx, seq, ev)
}

// parseBody reads and checks a hand-written body with the rules a manifest's
// resources obey: kinds, clean absolute paths, modes, content for files, one
// declaration of each path.
func parseBody(mesh, node, file, text string) (compose.Declaration, error) {
	invalid := func(format string, args ...any) error {
		return aggregates.Refuse("declare", file, aggregates.ErrInvalid, fmt.Sprintf(format, args...))
	}
	if err := manifest.NoDuplicateKeys([]byte(text)); err != nil {
		return compose.Declaration{}, invalid("%s", err.Error())
	}
	var b body
	dec := json.NewDecoder(bytes.NewReader([]byte(text)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&b); err != nil {
		return compose.Declaration{}, invalid("%s", strings.TrimPrefix(err.Error(), "json: "))
	}
	d := compose.Declaration{Mesh: mesh, Node: node, Modules: []compose.ModuleBuild{}, Resources: []compose.Resource{}, Receives: []compose.Receipt{}}
	modules := map[string]bool{}
	for i, r := range b.Resources {
		if r.Module == "" {
			r.Module = declaredModule
		}
		res := manifest.Resource{Kind: r.Kind, Path: r.Path, Mode: r.Mode, Content: r.Content, Artifact: r.Artifact, Digest: r.Digest}
		if r.Kind == manifest.KindFile && r.Content == nil {
			empty := ""
			res.Content, r.Content = &empty, &empty
		}
		m := manifest.Manifest{Module: r.Module, Resources: []manifest.Resource{res}}
		if err := m.Validate(); err != nil {
			return d, invalid("resources[%d]: %s", i, strings.TrimPrefix(err.Error(), "manifest "+r.Module+": resources[0]: "))
		}
		mode, _ := manifest.ParseMode(r.Mode)
		r.Mode = fmt.Sprintf("%04o", mode)
		modules[r.Module] = true
		d.Resources = append(d.Resources, r)
	}
	slices.SortFunc(d.Resources, func(a, b compose.Resource) int { return strings.Compare(a.Path, b.Path) })
	for i := 1; i < len(d.Resources); i++ {
		if d.Resources[i].Path == d.Resources[i-1].Path {
			return d, invalid("%s is declared twice", d.Resources[i].Path)
		}
	}
	for m := range modules {
		d.Modules = append(d.Modules, compose.ModuleBuild{Module: m, Build: declaration.UnknownBuild})
	}
	slices.SortFunc(d.Modules, func(a, b compose.ModuleBuild) int { return strings.Compare(a.Module, b.Module) })
	if b.Receives != nil {
		d.Receives = b.Receives
	}
	return d, nil
}

// sizeArtifacts gives each artifact resource of a hand-written declaration
// its size from the log (issue 32), and refuses one naming no digest, or
// one the mesh does not hold: the node could fetch neither.
func (h *Service) sizeArtifacts(file string, d *compose.Declaration) error {
	sizes := map[string]int64{}
	if err := h.Proj.Read(func(v *projections.View) (err error) { sizes, err = v.ArtifactSizes(); return err }); err != nil {
		return err
	}
	for i, r := range d.Resources {
		if r.Kind != manifest.KindArtifact {
			continue
		}
		size, ok := sizes[r.Digest]
		if !ok {
			return aggregates.Refuse("declare", file, aggregates.ErrInvalid,
				fmt.Sprintf("the artifact at %s names digest %q, which the mesh does not hold: give the digest of one mesh artifact list shows", r.Path, r.Digest))
		}
		d.Resources[i].Size = size
	}
	return nil
}
