package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/meshctl/mesh/compose"
	"github.com/meshctl/mesh/declaration"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/events/store"
	"github.com/meshctl/mesh/secret"
	"github.com/nats-io/nats.go"
)

// contentKey is what the controller answered for one file that printed
// secret settings: its content key, or why there is none (a salt
// forgotten). Kept in memory only, never in the state directory: a key
// written there would open the file from the log after a forget.
type contentKey struct {
	key     []byte
	refused string
}

// keyed lists the files of d sealed under secret settings' salts.
func keyed(d *declaration.Declaration) []declaration.ContentKeyAsk {
	var out []declaration.ContentKeyAsk
	if d == nil {
		return nil
	}
	for _, r := range d.Resources {
		if r.Sealed != nil && len(r.Sealed.Keys) > 0 {
			out = append(out, declaration.ContentKeyAsk{Path: r.Path, Salts: r.Sealed.Keys})
		}
	}
	return out
}

// contentKeys asks the controller for the content keys of d's files that
// printed secret settings (issue 29 point 6): nil for a declaration with
// none. An error means no answer now (no controller, the bus away): the
// caller applies nothing and asks again, since a file it cannot open is
// not a failure of the declaration.
func (a *Agent) contentKeys(ctx context.Context, d *declaration.Declaration) (map[string]contentKey, error) {
	asks := keyed(d)
	if len(asks) == 0 {
		return nil, nil
	}
	out := make(map[string]contentKey, len(asks))
	for len(asks) > 0 {
		n := min(len(asks), declaration.MaxContentKeyFiles)
		if err := a.askContentKeys(ctx, asks[:n], out); err != nil {
			return nil, err
		}
		asks = asks[n:]
	}
	return out, nil
}

func (a *Agent) askContentKeys(ctx context.Context, asks []declaration.ContentKeyAsk, out map[string]contentKey) error {
	node := a.cfg.Join.Node
	b, _ := json.Marshal(declaration.ContentKeyRequest{Files: asks}) // strings: always encodes
	ctx, done := a.onLine(ctx)                                       // an ask lost with the bus is asked again after the reconnect
	defer done()
	ctx, cancel := store.Bound(ctx)
	defer cancel()
	resp, err := a.st.NC().RequestWithContext(ctx, events.ContentKeySubject(node), b)
	err = dropped(ctx, err)
	if errors.Is(err, nats.ErrNoResponders) {
		return errors.New("agent: no controller answers for the keys of this node's secret files; is it running?")
	}
	if err != nil {
		return fmt.Errorf("agent: cannot ask the controller for the keys of this node's secret files: %w", err)
	}
	var reply declaration.ContentKeyReply
	if err := json.Unmarshal(resp.Data, &reply); err != nil {
		return fmt.Errorf("agent: the controller's answer for the keys of this node's secret files is not one: %w", err)
	}
	if reply.Error != "" {
		return fmt.Errorf("agent: the controller cannot give the keys of this node's secret files now: %s", reply.Error)
	}
	for _, g := range reply.Files {
		if g.Refused != "" {
			out[g.Path] = contentKey{refused: g.Refused}
			continue
		}
		key, err := a.seal.openKey(node, g.Path, g.Box)
		if err != nil {
			out[g.Path] = contentKey{refused: fmt.Sprintf("the content key the controller gave does not open with this node's key (%v)", err)}
			continue
		}
		out[g.Path] = contentKey{key: key}
	}
	return nil
}

// openKeyed opens the inner box of a file that printed secret settings
// (content, as the box to the node held it) with its content key.
func (a *applier) openKeyed(r compose.Resource, inner []byte) ([]byte, error) {
	k, ok := a.keys[r.Path]
	switch {
	case !ok:
		return nil, errors.New("the controller gave no content key for it")
	case k.refused != "":
		return nil, errors.New(k.refused)
	}
	clear, err := secret.Open(k.key, secret.FilePlace(a.node, r.Path), string(inner))
	if err != nil {
		return nil, fmt.Errorf("its content does not open with the content key the controller gave (%v)", err)
	}
	return clear, nil
}

// unknowable says whether r's content cannot be known now: it printed
// secret settings and no key for it is at hand (the controller refused it,
// or was not asked). A drift check passes over such a file rather than
// call it changed.
func (a *applier) unknowable(r compose.Resource) bool {
	if r.Sealed == nil || len(r.Sealed.Keys) == 0 {
		return false
	}
	k, ok := a.keys[r.Path]
	return !ok || k.refused != ""
}
