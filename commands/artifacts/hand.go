package artifacts

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/meshctl/mesh/artifact"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/events/store"
	"github.com/meshctl/mesh/manifest"
	"github.com/meshctl/mesh/projections"
)

// Hand answers node's agent asking for the bytes of an artifact (rule 18):
// only a digest the node's last declaration installs is handed, through
// the node's one consumer of that object alone; anything else is refused.
// It waits for the fold to pass the newest message on the node's
// declaration subject first, so a declaration sent a moment ago counts.
func (h *Service) Hand(node string, data []byte) artifact.Handed {
	var req artifact.HandRequest
	if err := json.Unmarshal(data, &req); err != nil {
		return artifact.Handed{Refused: "the request does not decode"}
	}
	if why := artifact.ValidHandRequest(req); why != "" {
		return artifact.Handed{Refused: why}
	}
	ctx, cancel := context.WithTimeout(context.Background(), store.NewestWait)
	defer cancel()
	top, found, err := h.Store.Last(ctx, events.DeclarationSubject(node))
	if err != nil {
		return artifact.Handed{Error: err.Error()}
	}
	if !found {
		return artifact.Handed{Refused: fmt.Sprintf("%s was sent no declaration, so it installs no artifact", node)}
	}
	if err := h.Proj.WaitFor(ctx, top.Seq); err != nil {
		return artifact.Handed{Error: fmt.Sprintf("the controller has not folded event %d yet", top.Seq)}
	}
	var n projections.Node
	if err := h.Proj.Read(func(v *projections.View) (err error) { n, found, err = v.Node(node); return err }); err != nil {
		return artifact.Handed{Error: err.Error()}
	}
	if !found || n.Retired || n.LastSent == nil {
		return artifact.Handed{Refused: fmt.Sprintf("%s is not an active node that was sent a declaration", node)}
	}
	d, err := h.sent.LastSent(ctx, n)
	if err != nil {
		return artifact.Handed{Error: err.Error()}
	}
	for _, r := range d.Resources {
		if r.Kind == manifest.KindArtifact && r.Digest == req.Digest {
			obs, err := h.Bucket(ctx)
			if err != nil {
				return artifact.Handed{Error: err.Error()}
			}
			return artifact.Hand(ctx, h.Store.JetStream(), obs, node, req.Digest)
		}
	}
	return artifact.Handed{Refused: fmt.Sprintf("the last declaration sent to %s (sequence %d) installs no artifact %s: a node is handed only what its declaration names",
		node, n.LastSent.Sequence, manifest.ShortBuild(req.Digest))}
}
