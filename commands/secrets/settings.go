package secrets

import (
	"context"
	"fmt"
	"maps"
	"strconv"
	"time"

	"github.com/meshctl/mesh/aggregates"
	"github.com/meshctl/mesh/compose"
	"github.com/meshctl/mesh/declaration"
	"github.com/meshctl/mesh/manifest"
	"github.com/meshctl/mesh/projections"
	"github.com/meshctl/mesh/secret"
)

func settingPlace(node, module, name string, version int) string {
	return secret.Where("setting", node, module, name, strconv.Itoa(version))
}

// SealSettings is what an assignment records of the settings given: a
// secret one sealed (or, when it is the value already recorded, kept as
// recorded, so assigning the same again is nothing to do). What is not
// given is the assign decider's to keep (aggregates.AssignModule patches).
func (st *Store) SealSettings(ctx context.Context, node, module string, spec map[string]manifest.Setting, given, had map[string]string) (map[string]string, error) {
	out := make(map[string]string, len(given))
	for k, v := range given {
		s, known := spec[k]
		switch {
		case !known || !s.Secret:
			if secret.IsSealed(v) {
				return nil, aggregates.Refuse("assign", module, aggregates.ErrInvalid, fmt.Sprintf("setting %s begins with %q, which marks a sealed secret; a clear value may not", k, "sealed:"))
			}
			out[k] = v
		default:
			sealed, err := st.SealSetting(ctx, node, module, k, v, had[k])
			if err != nil {
				return nil, err
			}
			out[k] = sealed
		}
	}
	return out, nil
}

func (st *Store) SealSetting(ctx context.Context, node, module, name, value, had string) (string, error) {
	if st == nil {
		return "", ErrNone
	}
	version := 1
	if prev, err := secret.ParseSetting(had); err == nil {
		if clear, err := st.OpenSetting(ctx, node, module, name, had); err == nil && clear == value {
			return had, nil
		}
		version = prev.Version + 1
	}
	id, key, err := st.Fresh(ctx)
	if err != nil {
		return "", err
	}
	box := secret.Seal(key, settingPlace(node, module, name, version), []byte(value))
	return secret.Setting{Version: version, Key: id, Box: box}.String(), nil
}

// OpenSetting opens a sealed setting's value.
func (st *Store) OpenSetting(ctx context.Context, node, module, name, v string) (string, error) {
	s, err := secret.ParseSetting(v)
	if err != nil {
		return "", err
	}
	if st == nil {
		return "", ErrNone
	}
	key, err := st.Key(ctx, s.Key)
	if err != nil {
		return "", err
	}
	clear, err := secret.Open(key, settingPlace(node, module, name, s.Version), s.Box)
	return string(clear), err
}

// OpenSettings opens an assignment's sealed settings for composing it, or
// says why they do not open, as the assignment's problem.
func (st *Store) OpenSettings(a *compose.Assignment) {
	var opened map[string]string // a copy, made at the first sealed one: the row's map is shared
	for k, v := range a.Settings {
		if !secret.IsSealed(v) {
			continue
		}
		if opened == nil {
			opened = maps.Clone(a.Settings)
			a.Salts = map[string]string{}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		clear, err := st.OpenSetting(ctx, a.Node, a.Module, k, v)
		cancel()
		if err != nil {
			a.Problem = fmt.Sprintf("secret setting %s of %s on %s cannot be opened (%v); set it again: mesh assign %s %s --set-file %s=FILE",
				k, a.Module, a.Node, err, a.Node, a.Module, k)
			return
		}
		opened[k] = clear
		if s, err := secret.ParseSetting(v); err == nil {
			a.Salts[k] = s.Key
		}
	}
	if opened != nil {
		a.Settings = opened
	}
}

// ComposeSecrets seals and mints for composition with the controller's
// keys, the keys nodes made themselves (owned, issue 29), and the salts of
// secret settings (secrets).
type ComposeSecrets struct {
	Keys    *declaration.Keyring
	Owned   map[string]projections.NodeKeys
	Secrets *Store
}

// Seal seals content to node: to the X25519 key it made, when it made its
// keys, so that nothing the controller holds opens it again; else under
// the key derived for it from the controller's. Content that printed
// secret settings is sealed first under a key made of their salts
// (secret.ContentKey), which the agent asks for at apply (serveContentKeys):
// erasing a salt then leaves nothing that opens the file from the log.
func (c ComposeSecrets) Seal(node, path, content string, salts []string) (compose.Sealed, error) {
	s := compose.Sealed{MAC: secret.MAC(c.Keys.ContentMAC(), node, path, content)}
	inner := []byte(content)
	if len(salts) > 0 {
		key, err := c.contentKey(node, path, salts)
		if err != nil {
			return compose.Sealed{}, err
		}
		inner, s.Keys = []byte(secret.Seal(key, secret.FilePlace(node, path), inner)), salts
	}
	if k, ok := c.Owned[node]; ok {
		// An error leaves the box empty: the agent refuses a box that
		// does not open and says so in its report, never a file half made.
		s.Box, _ = secret.SealTo(k.Seal, secret.FilePlace(node, path), inner)
		return s, nil
	}
	s.Box = secret.Seal(c.Keys.NodeSeal(node), secret.FilePlace(node, path), inner)
	return s, nil
}

// contentKey is the key of the file at path on node that printed the
// secret settings sealed under salts.
func (c ComposeSecrets) contentKey(node, path string, salts []string) ([]byte, error) {
	if c.Secrets == nil {
		return nil, ErrNone
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return c.Secrets.ContentKey(ctx, node, path, salts)
}

// OverlayKey is the node's private overlay key as a template prints it: a
// node that made its keys holds its own, so its declaration carries a
// placeholder its agent puts the key in place of (declaration.OverlayPlaceholder).
func (c ComposeSecrets) OverlayKey(node string) string {
	if _, ok := c.Owned[node]; ok {
		return declaration.OverlayPlaceholder
	}
	private, _ := c.Keys.NodeOverlay(node)
	return private
}

func (c ComposeSecrets) Mint(r compose.CredentialRef) string {
	return secret.Mint(c.Keys.Mint(), r.Mesh, r.ProviderNode, r.Provider, r.Requirement, r.ConsumerNode, r.Consumer,
		strconv.FormatUint(r.Generation, 10))
}
