package meshmod

import (
	"context"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
)

// State is an instance's own keys in its module's state bucket: each
// method takes and gives keys without the node's prefix, which it adds and
// removes. Every call names its keys, because the bus refuses a read or
// write outside the prefix (a whole-bucket Keys or Watch, a get by
// revision): use KV directly only with keys under Prefix.
type State struct {
	KV     jetstream.KeyValue
	Prefix string // "NODE."
}

// Get reads key's newest value.
func (s *State) Get(ctx context.Context, key string) (jetstream.KeyValueEntry, error) {
	return s.KV.Get(ctx, s.Prefix+key)
}

// Put writes key.
func (s *State) Put(ctx context.Context, key string, value []byte) (uint64, error) {
	return s.KV.Put(ctx, s.Prefix+key, value)
}

// Create writes key only if it holds nothing.
func (s *State) Create(ctx context.Context, key string, value []byte) (uint64, error) {
	return s.KV.Create(ctx, s.Prefix+key, value)
}

// Update writes key only if its newest revision is still last.
func (s *State) Update(ctx context.Context, key string, value []byte, last uint64) (uint64, error) {
	return s.KV.Update(ctx, s.Prefix+key, value, last)
}

// Delete removes key.
func (s *State) Delete(ctx context.Context, key string) error {
	return s.KV.Delete(ctx, s.Prefix+key)
}

// Keys lists this instance's keys, without the prefix.
func (s *State) Keys(ctx context.Context) ([]string, error) {
	lister, err := s.KV.ListKeysFiltered(ctx, s.Prefix+">")
	if err != nil {
		return nil, err
	}
	var keys []string
	for k := range lister.Keys() {
		keys = append(keys, strings.TrimPrefix(k, s.Prefix))
	}
	// The lister stops its watcher itself once every key is listed (or
	// ctx ends, which the list must not hide as complete).
	return keys, ctx.Err()
}

// Watch follows this instance's keys matching pattern (a key, or one with
// wildcards: "*" for one token, ">" for the rest); entries carry the key
// with its prefix.
func (s *State) Watch(ctx context.Context, pattern string, opts ...jetstream.WatchOpt) (jetstream.KeyWatcher, error) {
	return s.KV.Watch(ctx, s.Prefix+pattern, opts...)
}
