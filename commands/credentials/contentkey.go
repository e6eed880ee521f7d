package credentials

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/meshctl/mesh/commands/secrets"
	"github.com/meshctl/mesh/declaration"
	"github.com/meshctl/mesh/events/store"
	"github.com/meshctl/mesh/projections"
	"github.com/meshctl/mesh/secret"
)

// maxSaltsAFile bounds the salts one file may name: a file prints a few
// secret settings, and a request naming thousands is not an agent's.
const maxSaltsAFile = 64

// ContentKeys answers one request of node's: each file's key sealed to
// node (to the X25519 key it made, or the key derived for a node enrolled
// before), or why not. A node asks only for its own name (the bus lets it
// publish on no other asking subject), and a key is bound to the node and
// the path, so what one node is given opens nothing of another's.
func (h *Service) ContentKeys(node string, data []byte) declaration.ContentKeyReply {
	var req declaration.ContentKeyRequest
	if err := json.Unmarshal(data, &req); err != nil || len(req.Files) == 0 || len(req.Files) > declaration.MaxContentKeyFiles {
		return declaration.ContentKeyReply{Error: fmt.Sprintf("the request is not a list of 1 to %d files", declaration.MaxContentKeyFiles)}
	}
	if h.Secrets == nil {
		return declaration.ContentKeyReply{Error: secrets.ErrNone.Error()}
	}
	var k projections.NodeKeys
	var owned bool
	if err := h.Proj.Read(func(v *projections.View) (err error) { k, owned, err = v.NodeKeys(node); return err }); err != nil {
		return declaration.ContentKeyReply{Error: err.Error()}
	}
	ctx, cancel := context.WithTimeout(context.Background(), store.NewestWait)
	defer cancel()
	out := declaration.ContentKeyReply{Files: make([]declaration.ContentKeyGiven, len(req.Files))}
	for i, f := range req.Files {
		out.Files[i].Path = f.Path
		if len(f.Salts) == 0 || len(f.Salts) > maxSaltsAFile {
			out.Files[i].Refused = fmt.Sprintf("a file names 1 to %d salts", maxSaltsAFile)
			continue
		}
		key, err := h.Secrets.ContentKey(ctx, node, f.Path, f.Salts)
		if errors.Is(err, secrets.ErrForgotten) {
			out.Files[i].Refused = fmt.Sprintf("a secret setting it printed was forgotten (mesh secret forget), so nothing can open it again; "+
				"set the setting again with mesh assign %s MODULE --set-file SETTING=FILE and push", node)
			continue
		}
		if err != nil {
			return declaration.ContentKeyReply{Error: err.Error()}
		}
		place := secret.ContentKeyPlace(node, f.Path)
		if owned {
			box, err := secret.SealTo(k.Seal, place, key)
			if err != nil {
				return declaration.ContentKeyReply{Error: err.Error()}
			}
			out.Files[i].Box = box
			continue
		}
		out.Files[i].Box = secret.Seal(h.Keys.NodeSeal(node), place, key)
	}
	return out
}
