package access

import (
	"context"
	"fmt"
	"time"

	"github.com/meshctl/mesh/aggregates"
	"github.com/meshctl/mesh/busauth"
	"github.com/meshctl/mesh/projections"
	"github.com/meshctl/mesh/wire"
)

// Join answers what an agent needs to join as node: a new one-use token
// for its name, while the node has not made its keys. A node that has is
// refused: its keys are on its machine, and a new machine for it is a
// re-key, which is recorded (mesh node rekey).
func (h *Service) Join(ctx context.Context, r wire.NameRequest) (wire.Identity, error) {
	if err := h.ActiveNode(ctx, "join", r.Name); err != nil {
		return wire.Identity{}, err
	}
	var k projections.NodeKeys
	var owned bool
	if err := h.Proj.Read(func(v *projections.View) (err error) { k, owned, err = v.NodeKeys(r.Name); return err }); err != nil {
		return wire.Identity{}, err
	}
	if owned {
		return wire.Identity{}, aggregates.Refuse("join", r.Name, aggregates.ErrInvalid,
			fmt.Sprintf("its agent made its keys at %s and holds them; to give a new or wiped machine this name, mesh node rekey %s", k.At.UTC().Format(time.RFC3339), r.Name))
	}
	return h.NodeToken(ctx, r.Name, false)
}

// LegacyIdentity is the join of a node enrolled before nodes made their
// own keys: its seed derived from the controller key, which is why the
// controller key could make its word (issue 29). No verb answers it; it is
// kept for meshes whose agents hold such a join string, for the harnesses
// that simulate thousands of nodes, and for tests of that path.
func (h *Service) LegacyIdentity(node string) (wire.Identity, error) {
	kp, err := busauth.NodeKey(h.Key, node)
	if err != nil {
		return wire.Identity{}, err
	}
	seed, err := kp.Seed()
	if err != nil {
		return wire.Identity{}, err
	}
	return wire.Identity{Mesh: h.Mesh, Node: node, Key: h.PublicKey, Seed: string(seed)}, nil
}
