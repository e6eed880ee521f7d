package commands

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"sync"
	"time"

	"github.com/meshctl/mesh/aggregates"
	"github.com/meshctl/mesh/compose"
	"github.com/meshctl/mesh/declaration"
	"github.com/meshctl/mesh/manifest"
	"github.com/meshctl/mesh/secret"
	"github.com/nats-io/nats.go/jetstream"
)

// SecretsBucket is the key-value bucket of the salts secret settings are
// sealed with (rule 21). A secret setting in the log is sealed under a key
// made of the controller's "secret settings" key and the secret's own
// random salt, kept here and nowhere else: the salt alone opens nothing,
// the controller key alone opens nothing, and deleting the salt (mesh
// secret forget) makes the value unreadable from the log and every backup
// taken after, by anyone, the controller included. Unlike the stream, this
// bucket may lose an entry: that is its purpose.
const SecretsBucket = "mesh-secrets"

// ErrForgotten is a secret whose salt is gone: forgotten, or a bus restored
// without the secrets bucket.
var ErrForgotten = errors.New("its salt is not in the secrets bucket: it was forgotten (or the bus was restored without the bucket)")

// secretKeys finds and makes the keys secret settings are sealed under.
type secretKeys struct {
	kv   jetstream.KeyValue
	base []byte

	mu   sync.Mutex
	keys map[string][]byte // salt id -> key, remembered once derived
}

// assertSecrets makes the secrets bucket if it is not there, with the
// stream's replicas (rule 15), and says which.
func assertSecrets(ctx context.Context, js jetstream.JetStream, replicas int, base []byte) (*secretKeys, string, error) {
	if replicas == 0 {
		replicas = 1
	}
	kv, err := js.KeyValue(ctx, SecretsBucket)
	action := "found"
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		kv, err = js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: SecretsBucket, History: 1,
			Description: "salts of the mesh's secret settings; deleting one forgets that secret", Storage: jetstream.FileStorage, Replicas: replicas})
		action = "created"
	}
	if err != nil {
		return nil, "", fmt.Errorf("cannot assert the secrets bucket %s: %w", SecretsBucket, err)
	}
	return &secretKeys{kv: kv, base: base, keys: map[string][]byte{}}, fmt.Sprintf("secrets bucket %s: %s", SecretsBucket, action), nil
}

// fresh makes a new salt, records it, and answers its id and key.
func (s *secretKeys) fresh(ctx context.Context) (string, []byte, error) {
	var b [8 + 32]byte
	rand.Read(b[:]) // never fails
	id, salt := hex.EncodeToString(b[:8]), b[8:]
	if _, err := s.kv.Create(ctx, id, salt); err != nil {
		return "", nil, fmt.Errorf("cannot record a secret's salt in %s: %w", SecretsBucket, err)
	}
	return id, s.remember(id, salt), nil
}

func (s *secretKeys) remember(id string, salt []byte) []byte {
	key := []byte(secret.MAC(s.base, id, string(salt)))
	s.mu.Lock()
	s.keys[id] = key
	s.mu.Unlock()
	return key
}

// key is the key of salt id.
func (s *secretKeys) key(ctx context.Context, id string) ([]byte, error) {
	s.mu.Lock()
	key, ok := s.keys[id]
	s.mu.Unlock()
	if ok {
		return key, nil
	}
	e, err := s.kv.Get(ctx, id)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, ErrForgotten
	}
	if err != nil {
		return nil, fmt.Errorf("cannot read a secret's salt from %s: %w", SecretsBucket, err)
	}
	return s.remember(id, e.Value()), nil
}

func settingPlace(node, module, name string, version int) string {
	return secret.Where("setting", node, module, name, strconv.Itoa(version))
}

// sealSettings is what an assignment records of the settings given: a
// secret one sealed (or, when it is the value already recorded, kept as
// recorded, so assigning the same again is nothing to do); a secret one
// not given keeps its recorded value, so an upgrade need not type it again.
func (h *Handlers) sealSettings(ctx context.Context, node, module string, spec map[string]manifest.Setting, given, had map[string]string) (map[string]string, error) {
	out := make(map[string]string, len(given))
	for k, v := range given {
		s, known := spec[k]
		switch {
		case !known || !s.Secret:
			if secret.IsSealed(v) {
				return nil, &aggregates.Error{Op: "assign", ID: module, Err: aggregates.ErrInvalid,
					Detail: fmt.Sprintf("setting %s begins with %q, which marks a sealed secret; a clear value may not", k, "sealed:")}
			}
			out[k] = v
		default:
			sealed, err := h.sealSetting(ctx, node, module, k, v, had[k])
			if err != nil {
				return nil, err
			}
			out[k] = sealed
		}
	}
	for k, v := range had {
		if _, given := given[k]; !given && spec[k].Secret && secret.IsSealed(v) {
			out[k] = v
		}
	}
	return out, nil
}

// errNoSecrets: handlers started without the controller's secrets bucket.
var errNoSecrets = errors.New("this controller has no secrets bucket to seal with")

func (h *Handlers) sealSetting(ctx context.Context, node, module, name, value, had string) (string, error) {
	if h.secrets == nil {
		return "", errNoSecrets
	}
	version := 1
	if prev, err := secret.ParseSetting(had); err == nil {
		if clear, err := h.openSetting(ctx, node, module, name, had); err == nil && clear == value {
			return had, nil
		}
		version = prev.Version + 1
	}
	id, key, err := h.secrets.fresh(ctx)
	if err != nil {
		return "", err
	}
	box := secret.Seal(key, settingPlace(node, module, name, version), []byte(value))
	return secret.Setting{Version: version, Key: id, Box: box}.String(), nil
}

// openSetting opens a sealed setting's value.
func (h *Handlers) openSetting(ctx context.Context, node, module, name, v string) (string, error) {
	s, err := secret.ParseSetting(v)
	if err != nil {
		return "", err
	}
	if h.secrets == nil {
		return "", errNoSecrets
	}
	key, err := h.secrets.key(ctx, s.Key)
	if err != nil {
		return "", err
	}
	clear, err := secret.Open(key, settingPlace(node, module, name, s.Version), s.Box)
	return string(clear), err
}

// openSettings opens an assignment's sealed settings for composing it, or
// says why they do not open, as the assignment's problem.
func (h *Handlers) openSettings(a *compose.Assignment) {
	var opened map[string]string // a copy, made at the first sealed one: the row's map is shared
	for k, v := range a.Settings {
		if !secret.IsSealed(v) {
			continue
		}
		if opened == nil {
			opened = maps.Clone(a.Settings)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		clear, err := h.openSetting(ctx, a.Node, a.Module, k, v)
		cancel()
		if err != nil {
			a.Problem = fmt.Sprintf("secret setting %s of %s on %s cannot be opened (%v); set it again: mesh assign %s %s --set-file %s=FILE",
				k, a.Module, a.Node, err, a.Node, a.Module, k)
			return
		}
		opened[k] = clear
	}
	if opened != nil {
		a.Settings = opened
	}
}

// composeSecrets seals and mints for composition with the controller's keys.
type composeSecrets struct{ keys *declaration.Keyring }

func (c composeSecrets) Seal(node, path, content string) compose.Sealed {
	return compose.Sealed{MAC: secret.MAC(c.keys.ContentMAC(), node, path, content),
		Box: secret.Seal(c.keys.NodeSeal(node), secret.FilePlace(node, path), []byte(content))}
}

func (c composeSecrets) Mint(r compose.CredentialRef) string {
	return secret.Mint(c.keys.Mint(), r.Mesh, r.ProviderNode, r.Provider, r.Requirement, r.ConsumerNode, r.Consumer,
		strconv.FormatUint(r.Generation, 10))
}
