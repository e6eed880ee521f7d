package secrets

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/events/store"
	"github.com/meshctl/mesh/secret"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// SecretsStream holds the salts secret settings are sealed with (rule 21),
// one message a salt on mesh.secret.<id>. A secret setting in the log is
// sealed under a key made of the controller's "secret settings" key and
// the secret's own random salt, kept here and nowhere else: the salt alone
// opens nothing, the controller key alone opens nothing, and erasing the
// salt (mesh secret forget) makes the value unreadable from the log and
// every backup taken after, by anyone, the controller included.
//
// It is a stream of its own rather than a key-value bucket because a
// bucket's stream denies deleting a message, and only a delete that
// overwrites the bytes where the bus keeps them forgets: a purge leaves
// them on disk (TestForgettingASecret scans the disk for them). Unlike the
// event stream, this one may lose a message: that is its purpose.
const SecretsStream = events.SecretsStream

const (
	secretSubject = events.SecretPrefix + "."
	// forgottenHeader marks the message that replaces an erased salt:
	// every controller's watch sees it and drops the key it derived.
	forgottenHeader = "Mesh-Forgotten"
)

// ErrForgotten is a secret whose salt is gone: forgotten, or a bus restored
// from a backup that did not carry it.
var ErrForgotten = errors.New("its salt is gone from the secrets stream: the value was forgotten, or the bus restored from a backup without its salt")

// ErrNone: handlers started without the controller's secrets stream.
var ErrNone = errors.New("this controller has no secrets stream to seal with")

// Store finds and makes the keys secret settings are sealed under.
type Store struct {
	js     jetstream.JetStream
	stream jetstream.Stream
	base   []byte
	// stop ends the watch that drops a forgotten salt's key from keys, so
	// that every controller on the bus forgets it, not only the one asked.
	stop func()

	mu   sync.Mutex
	keys map[string][]byte // salt id -> key, remembered once derived
	// forgets counts the salts dropped: what was opened before a drop may
	// no longer be opened, so a cache of opened settings keys on it.
	forgets atomic.Uint64
}

// Forgets is how many salts this controller has dropped (0 for none or a
// nil store): a world indexed at another count holds settings opened
// with a key that may be gone.
func (s *Store) Forgets() uint64 {
	if s == nil {
		return 0
	}
	return s.forgets.Load()
}

// Assert makes the secrets stream if it is not there, with the
// event stream's replicas (rule 15), and says which.
func Assert(ctx context.Context, js jetstream.JetStream, replicas int, base []byte) (*Store, string, error) {
	stream, action, err := secretsStream(ctx, js, replicas)
	if err != nil {
		return nil, "", err
	}
	s := &Store{js: js, stream: stream, base: base, keys: map[string][]byte{}}
	if err := s.watch(); err != nil {
		return nil, "", err
	}
	return s, fmt.Sprintf("secrets stream %s: %s", SecretsStream, action), nil
}

func secretsStream(ctx context.Context, js jetstream.JetStream, replicas int) (jetstream.Stream, string, error) {
	stream, err := js.Stream(ctx, SecretsStream)
	if err == nil {
		if oneASubject(stream.CachedInfo().Config) {
			return stream, "found", nil
		}
		return closeSaltSubjects(ctx, js, stream)
	}
	if !errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, "", fmt.Errorf("cannot assert the secrets stream %s: %w", SecretsStream, err)
	}
	cfg := jetstream.StreamConfig{Name: SecretsStream, Subjects: []string{secretSubject + "*"},
		Description: "salts of the mesh's secret settings; erasing one forgets that secret",
		Storage:     jetstream.FileStorage, Replicas: max(replicas, 1), AllowDirect: true,
		// A purge would forget every secret at once, and leave the bytes.
		DenyPurge: true}
	stream, err = js.CreateStream(ctx, oneMessageASubject(cfg))
	if err != nil {
		return nil, "", fmt.Errorf("cannot create the secrets stream %s: %w", SecretsStream, err)
	}
	return stream, "created", nil
}

// oneMessageASubject makes the stream refuse a second message on a salt's
// subject. Anyone may aim a reply subject at mesh.secret.<id> (the bus's
// acknowledgement of a node's report lands there), and what lands there
// was taken for the salt: the setting no longer opened, a backup carried
// the junk in place of the salt, and a forget erased the junk and left the
// salt on disk. A salt is written once; its subject takes one more
// message only once it is erased (the marker that says so).
func oneMessageASubject(cfg jetstream.StreamConfig) jetstream.StreamConfig {
	cfg.MaxMsgsPerSubject, cfg.Discard, cfg.DiscardNewPerSubject = 1, jetstream.DiscardNew, true
	return cfg
}

func oneASubject(cfg jetstream.StreamConfig) bool {
	return cfg.MaxMsgsPerSubject == 1 && cfg.Discard == jetstream.DiscardNew && cfg.DiscardNewPerSubject
}

// closeSaltSubjects brings a secrets stream made before oneMessageASubject
// to it: first every message that is neither a salt nor the marker of one
// erased is deleted (a limit of one a subject would keep the newest, the
// junk, and drop the salt), then the stream takes the limit.
func closeSaltSubjects(ctx context.Context, js jetstream.JetStream, stream jetstream.Stream) (jetstream.Stream, string, error) {
	dropped := 0
	err := eachSecretMsg(ctx, stream, func(m jetstream.Msg, meta *jetstream.MsgMetadata) error {
		if isSalt(m.Data(), m.Headers()) || m.Headers().Get(forgottenHeader) != "" {
			return nil
		}
		dropped++
		return stream.SecureDeleteMsg(ctx, meta.Sequence.Stream)
	})
	if err != nil {
		return nil, "", fmt.Errorf("cannot clear the secrets stream %s of what is not a salt: %w", SecretsStream, err)
	}
	stream, err = js.UpdateStream(ctx, oneMessageASubject(stream.CachedInfo().Config))
	if err != nil {
		return nil, "", fmt.Errorf("cannot limit the secrets stream %s to one message a salt: %w", SecretsStream, err)
	}
	return stream, fmt.Sprintf("found; now one message a salt (%d message(s) that were not salts deleted)", dropped), nil
}

// saltSize is the length of every salt (fresh).
const saltSize = 32

// isSalt says whether a message of the secrets stream is a salt: what
// putSalt writes, never a marker nor what a reply subject put there. A salt
// is written expecting its subject empty, and the bus keeps that header
// with it; an answer aimed at the subject (the bus's acknowledgement of a
// publish, whose length an attacker can steer) carries no header at all.
func isSalt(data []byte, h nats.Header) bool {
	return len(data) == saltSize && h.Get(jetstream.ExpectedLastSubjSeqHeader) == "0" && h.Get(forgottenHeader) == ""
}

// watch drops the key of each salt erased, by this controller or another:
// one consumer a controller, never one a secret.
func (s *Store) watch() error {
	ctx, cancel := context.WithCancel(context.Background())
	// From the sequence after the stream's last, not "new messages only":
	// an ordered consumer reset before it delivered anything is made again
	// with its first policy, and "new" then skipped a forget published in
	// between for good (a second controller kept a forgotten key 30 s and
	// more). A start sequence is the same on every remake.
	var cons jetstream.Consumer
	info, err := s.stream.Info(ctx)
	if err == nil {
		cons, err = s.stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
			DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: info.State.LastSeq + 1})
	}
	if err == nil {
		var cc jetstream.ConsumeContext
		cc, err = cons.Consume(func(m jetstream.Msg) {
			if m.Headers().Get(forgottenHeader) != "" {
				s.drop(m.Subject()[len(secretSubject):])
			}
		})
		if err == nil {
			s.stop = func() { cc.Stop(); cancel() }
			return nil
		}
	}
	cancel()
	return fmt.Errorf("cannot watch the secrets stream %s: %w", SecretsStream, err)
}

// fresh makes a new salt, records it, and answers its id and key.
func (s *Store) Fresh(ctx context.Context) (string, []byte, error) {
	var b [8 + saltSize]byte
	rand.Read(b[:]) // never fails
	id, salt := hex.EncodeToString(b[:8]), b[8:]
	if err := putSalt(ctx, s.js, id, salt); err != nil {
		return "", nil, err
	}
	return id, s.remember(id, salt), nil
}

// putSalt records a salt that must not exist yet.
func putSalt(ctx context.Context, js jetstream.JetStream, id string, salt []byte) error {
	if _, err := js.Publish(ctx, secretSubject+id, salt, jetstream.WithExpectLastSequencePerSubject(0)); err != nil {
		return fmt.Errorf("cannot record a secret's salt in %s: %w", SecretsStream, err)
	}
	return nil
}

func (s *Store) remember(id string, salt []byte) []byte {
	key := []byte(secret.MAC(s.base, id, string(salt)))
	s.mu.Lock()
	s.keys[id] = key
	s.mu.Unlock()
	return key
}

func (s *Store) drop(id string) {
	s.mu.Lock()
	delete(s.keys, id)
	s.mu.Unlock()
	s.forgets.Add(1)
}

// salt reads salt id: nil when it was never recorded or was erased.
func (s *Store) salt(ctx context.Context, id string) (*jetstream.RawStreamMsg, error) {
	m, err := s.stream.GetLastMsgForSubject(ctx, secretSubject+id)
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("cannot read a secret's salt from %s: %w", SecretsStream, err)
	case !isSalt(m.Data, m.Header):
		return nil, nil // erased (its marker), or never a salt
	}
	return m, nil
}

// key is the key of salt id.
func (s *Store) Key(ctx context.Context, id string) ([]byte, error) {
	s.mu.Lock()
	key, ok := s.keys[id]
	s.mu.Unlock()
	if ok {
		return key, nil
	}
	m, err := s.salt(ctx, id)
	switch {
	case err != nil:
		return nil, err
	case m == nil:
		return nil, ErrForgotten
	}
	return s.remember(id, m.Data), nil
}

// contentKey is the key of the file at path on node that printed the
// secret settings sealed under salts (secret.ContentKey): made afresh from
// the salts each time, and ErrForgotten once any of them is erased.
func (s *Store) ContentKey(ctx context.Context, node, path string, salts []string) ([]byte, error) {
	keys := make([][]byte, len(salts))
	for i, id := range salts {
		k, err := s.Key(ctx, id)
		if err != nil {
			return nil, err
		}
		keys[i] = k
	}
	return secret.ContentKey(keys, node, path), nil
}

// present says whether salt id is still there.
func (s *Store) Present(ctx context.Context, id string) (bool, error) {
	m, err := s.salt(ctx, id)
	return m != nil, err
}

// erase forgets salt id: its message is overwritten where the bus keeps
// it (on every replica), then a marker takes its place, which every
// controller's watch sees. Answers false when it was gone already.
func (s *Store) Erase(ctx context.Context, id string) (bool, error) {
	m, err := s.salt(ctx, id)
	if err != nil || m == nil {
		s.drop(id)
		return false, err
	}
	if err := s.stream.SecureDeleteMsg(ctx, m.Sequence); err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
		return false, fmt.Errorf("cannot erase a secret's salt from %s: %w", SecretsStream, err)
	}
	marker := nats.NewMsg(secretSubject + id)
	marker.Header.Set(forgottenHeader, "1")
	if _, err := s.js.PublishMsg(ctx, marker); err != nil {
		return false, fmt.Errorf("cannot mark a secret's salt forgotten in %s: %w", SecretsStream, err)
	}
	s.drop(id)
	return true, nil
}

// scanAt is how many unknown salts make one read of the whole secrets
// stream cheaper than a read each: ten thousand reads by subject were
// most of the first push after a restart (1.44 s for 10,000 nodes).
const scanAt = 64

// preload derives the keys of the salts ids names that are not yet known,
// by one read of the whole stream when there are many.
func (s *Store) Preload(ctx context.Context, ids []string) error {
	s.mu.Lock()
	missing := 0
	for _, id := range ids {
		if _, ok := s.keys[id]; !ok {
			missing++
		}
	}
	s.mu.Unlock()
	if missing < scanAt {
		return nil // each is read when it is opened
	}
	salts, err := ExportSalts(ctx, s.js)
	if err != nil {
		return err
	}
	for _, id := range ids {
		if salt, ok := salts[id]; ok {
			s.remember(id, salt)
		}
	}
	return nil
}

// ExportSalts reads every salt not forgotten, by id: what a backup carries
// so that a restored mesh can open the secrets it held. A salt erased
// before the backup is not in it, which is what forgetting promises.
func ExportSalts(ctx context.Context, js jetstream.JetStream) (map[string][]byte, error) {
	out := map[string][]byte{}
	stream, err := js.Stream(ctx, SecretsStream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return out, nil // a mesh that never held a secret
	}
	if err != nil {
		return nil, fmt.Errorf("cannot read the secrets stream %s: %w", SecretsStream, err)
	}
	err = eachSecretMsg(ctx, stream, func(m jetstream.Msg, _ *jetstream.MsgMetadata) error {
		id := m.Subject()[len(secretSubject):]
		switch {
		case isSalt(m.Data(), m.Headers()):
			out[id] = m.Data()
		case m.Headers().Get(forgottenHeader) != "":
			delete(out, id)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("cannot read the secrets stream %s: %w", SecretsStream, err)
	}
	return out, nil
}

// eachSecretMsg calls f with every message of the secrets stream, in order.
func eachSecretMsg(ctx context.Context, stream jetstream.Stream, f func(jetstream.Msg, *jetstream.MsgMetadata) error) error {
	// The stream was just looked up (js.Stream): its cached state is
	// what the bus holds now, so an empty one costs no consumer.
	if stream.CachedInfo().State.Msgs == 0 {
		return nil
	}
	cons, err := stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		return err
	}
	it, err := cons.Messages()
	if err != nil {
		return err
	}
	defer it.Stop()
	for {
		// Bounded (rule 26): the stream said it holds messages, so one that
		// does not come within the store's call bound is a bus gone away,
		// and the start says so rather than wait for ever.
		m, err := it.Next(jetstream.NextMaxWait(store.CallTimeout))
		if err != nil {
			return err
		}
		meta, err := m.Metadata()
		if err != nil {
			return err
		}
		if err := f(m, meta); err != nil || meta.NumPending == 0 {
			return err
		}
	}
}

// RestoreSalts puts a backup's salts into the bus's secrets stream, making
// it if needed; a salt already there is left as it is. It answers how many
// it put.
func RestoreSalts(ctx context.Context, js jetstream.JetStream, replicas int, salts map[string][]byte) (int, error) {
	stream, _, err := secretsStream(ctx, js, replicas)
	if err != nil {
		return 0, err
	}
	n := 0
	for id, salt := range salts {
		if _, err := stream.GetLastMsgForSubject(ctx, secretSubject+id); err == nil {
			continue // restored by an earlier run of the same restore
		} else if !errors.Is(err, jetstream.ErrMsgNotFound) {
			return n, fmt.Errorf("cannot read the secrets stream %s: %w", SecretsStream, err)
		}
		if err := putSalt(ctx, js, id, salt); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// Stop ends the watch that drops forgotten salts' keys (nil: nothing to stop).
func (s *Store) Stop() {
	if s != nil && s.stop != nil {
		s.stop()
	}
}
