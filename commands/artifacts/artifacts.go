package artifacts

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/meshctl/mesh/aggregates"
	"github.com/meshctl/mesh/artifact"
	"github.com/meshctl/mesh/commands/core"
	"github.com/meshctl/mesh/compose"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/manifest"
	"github.com/meshctl/mesh/projections"
	"github.com/meshctl/mesh/wire"
	"github.com/nats-io/nats.go/jetstream"
)

// Sent reads the declaration a node was sent last (package push).
type Sent interface {
	LastSent(ctx context.Context, n projections.Node) (*compose.Declaration, error)
}

// Service is the artifacts' verbs over one Core.
type Service struct {
	*core.Core
	sent Sent
	// MaxBytes is the largest artifact a put takes (mesh up
	// --artifact-max; artifact.DefaultMaxBytes unless set).
	MaxBytes int64
}

// New is the artifacts' verbs over c, reading what nodes were sent through s.
func New(c *core.Core, s Sent) *Service {
	return &Service{Core: c, sent: s, MaxBytes: artifact.DefaultMaxBytes}
}

// OpenBus is who a put or a removal is recorded as on an open bus, where
// no call proves its caller.
const OpenBus = "operator"

// by is who the put or removal asked under ctx is recorded as: the
// operator the endpoint proved from the call's key (events.ByOf), never a
// field of the request, which the client could fill in as anyone.
func by(ctx context.Context) string {
	if b := events.ByOf(ctx); b != "" {
		return b
	}
	return OpenBus
}

// Bucket is the artifacts' bucket, which the controller asserted at start.
func (h *Service) Bucket(ctx context.Context) (jetstream.ObjectStore, error) {
	return artifact.Bucket(ctx, h.Store.JetStream())
}

// PutArtifact answers a put: refused for a bad name, digest or size (the
// bound named with the size) before a byte is uploaded; Upload while the
// bucket lacks the bytes; and once it holds them, the object read back and
// its digest checked, the name recorded as standing for them (or nothing
// to do, when it does already).
func (h *Service) PutArtifact(ctx context.Context, r wire.ArtifactPutRequest) (wire.ArtifactPut, error) {
	out := wire.ArtifactPut{Bucket: events.ArtifactBucket, MaxBytes: h.MaxBytes}
	if err := events.ValidateName("artifact", r.Name); err != nil {
		return out, aggregates.Refuse("put artifact", r.Name, aggregates.ErrInvalid, err.Error()+"; name it with --name")
	}
	if !manifest.ValidDigest(r.Digest) {
		return out, aggregates.Refuse("put artifact", r.Name, aggregates.ErrInvalid, fmt.Sprintf("%q is not a sha256 in 64 lowercase hex digits", r.Digest))
	}
	if r.Size < 0 || r.Size > h.MaxBytes {
		return out, aggregates.Refuse("put artifact", r.Name, aggregates.ErrInvalid,
			fmt.Sprintf("it is %d bytes, over the mesh's bound of %d bytes; start the controller with a larger --artifact-max to take it", r.Size, h.MaxBytes))
	}
	obs, err := h.Bucket(ctx)
	if err != nil {
		return out, err
	}
	info, err := obs.GetInfo(ctx, r.Digest)
	if err == jetstream.ErrObjectNotFound {
		out.Upload = true
		return out, nil
	}
	if err != nil {
		return out, err
	}
	if int64(info.Size) != r.Size {
		_ = obs.Delete(ctx, r.Digest)
		return out, aggregates.Refuse("put artifact", r.Name, aggregates.ErrInvalid,
			fmt.Sprintf("the object uploaded is %d bytes, not the %d bytes hashed; it was deleted: put it again", info.Size, r.Size))
	}
	size, err := artifact.Check(ctx, obs, r.Digest)
	if err != nil {
		return out, aggregates.Refuse("put artifact", r.Name, aggregates.ErrInvalid, err.Error()+"; put it again")
	}
	seq, err := core.Decide(ctx, h.Core, "put artifact", events.ArtifactAggregate(r.Name), r.CommandID,
		func() *aggregates.Artifact { return aggregates.NewArtifact(r.Name) },
		func(a *aggregates.Artifact) ([]events.Event, error) {
			return a.DecideStore(aggregates.StoreArtifact{Digest: r.Digest, Size: size, By: by(ctx)})
		})
	if err != nil {
		return out, err
	}
	if seq != 0 {
		h.Log.Info("artifact stored", "name", r.Name, "digest", manifest.ShortBuild(r.Digest), "size", size, "seq", seq)
	}
	out.Changed, out.Seq = seq != 0, seq
	err = h.Proj.Read(func(v *projections.View) (err error) {
		out.Artifact, _, err = v.Artifact(r.Name)
		return err
	})
	return out, err
}

// ListArtifacts answers every artifact name that stands for bytes.
func (h *Service) ListArtifacts(context.Context, wire.Empty) (wire.ArtifactList, error) {
	out := wire.ArtifactList{Artifacts: []wire.ArtifactRow{}}
	err := h.Proj.Read(func(v *projections.View) error {
		rows, err := v.Artifacts()
		out.Artifacts = append(out.Artifacts, rows...)
		return err
	})
	return out, err
}

// ShowArtifact answers one name, and the nodes whose last declaration
// installs one of its digests.
func (h *Service) ShowArtifact(ctx context.Context, r wire.NameRequest) (wire.ArtifactView, error) {
	var out wire.ArtifactView
	var found bool
	if err := h.Proj.Read(func(v *projections.View) (err error) {
		out.ArtifactRow, found, err = v.Artifact(r.Name)
		return err
	}); err != nil {
		return out, err
	}
	if !found {
		return out, aggregates.Refuse("show artifact", r.Name, aggregates.ErrUnknown, "no artifact is stored under that name (mesh artifact list names them)")
	}
	var digests []string
	for _, v := range out.Versions {
		digests = append(digests, v.Digest)
	}
	uses, err := h.inForce(ctx, digests)
	out.InForce = uses
	return out, err
}

// RemoveArtifact removes a name and deletes the objects no other name
// holds; refused while a node's last declaration installs one of its
// digests, naming the nodes, since the node could not fetch it again (a
// wiped cache, a new machine under the name).
func (h *Service) RemoveArtifact(ctx context.Context, r wire.ArtifactRemoveRequest) (wire.ArtifactRemoved, error) {
	out := wire.ArtifactRemoved{Name: r.Name, Digests: []string{}, Deleted: []string{}}
	if err := events.ValidateName("artifact", r.Name); err != nil {
		return out, aggregates.Refuse("remove artifact", r.Name, aggregates.ErrInvalid, err.Error())
	}
	var removed []string
	seq, err := core.Decide(ctx, h.Core, "remove artifact", events.ArtifactAggregate(r.Name), r.CommandID,
		func() *aggregates.Artifact { return aggregates.NewArtifact(r.Name) },
		func(a *aggregates.Artifact) ([]events.Event, error) {
			uses, err := h.inForce(ctx, a.Digests)
			if err != nil {
				return nil, err
			}
			removed = slices.Clone(a.Digests)
			return a.DecideRemove(aggregates.RemoveArtifact{By: by(ctx), InUse: inUse(uses)})
		})
	if err != nil {
		return out, err
	}
	out.Changed, out.Seq, out.Digests = true, seq, removed
	obs, err := h.Bucket(ctx)
	if err != nil {
		return out, err
	}
	for _, d := range removed {
		var held bool
		if err := h.Proj.Read(func(v *projections.View) (err error) { _, held, err = v.ArtifactObject(d); return err }); err != nil {
			return out, err
		}
		if held {
			continue // another name stands for these bytes
		}
		if err := obs.Delete(ctx, d); err != nil && err != jetstream.ErrObjectNotFound {
			return out, fmt.Errorf("removed artifact %s at event %d, but cannot delete its object %s: %w; mesh artifact rm cannot retry it, the bucket keeps those bytes", r.Name, seq, d, err)
		}
		out.Deleted = append(out.Deleted, d)
	}
	h.Log.Info("artifact removed", "name", r.Name, "digests", len(removed), "seq", seq)
	return out, nil
}

// inUse is the refusal's sentence for uses ("" for none).
func inUse(uses []wire.ArtifactUse) string {
	if len(uses) == 0 {
		return ""
	}
	var names []string
	for _, u := range uses {
		names = append(names, fmt.Sprintf("%s (%s at %s, sequence %d)", u.Node, manifest.ShortBuild(u.Digest), u.Path, u.Sequence))
	}
	return fmt.Sprintf("the last declaration of %d node(s) installs it: %s; unassign or move those modules to another build and push first",
		len(uses), strings.Join(names, ", "))
}

// inForce are the nodes whose last declaration installs one of digests:
// one read of the log a node that was sent anything, which a removal, a
// rare act, can afford.
func (h *Service) inForce(ctx context.Context, digests []string) ([]wire.ArtifactUse, error) {
	out := []wire.ArtifactUse{}
	if len(digests) == 0 {
		return out, nil
	}
	var nodes []projections.Node
	if err := h.Proj.Read(func(v *projections.View) (err error) { nodes, err = v.Nodes(); return err }); err != nil {
		return nil, err
	}
	for _, n := range nodes {
		if n.Retired || n.LastSent == nil {
			continue
		}
		d, err := h.sent.LastSent(ctx, n)
		if err != nil {
			return nil, err
		}
		for _, r := range d.Resources {
			if r.Kind == manifest.KindArtifact && slices.Contains(digests, r.Digest) {
				out = append(out, wire.ArtifactUse{Node: n.Name, Digest: r.Digest, Path: r.Path, Sequence: n.LastSent.Sequence})
			}
		}
	}
	return out, nil
}
