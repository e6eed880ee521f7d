package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/meshctl/mesh/events"
	"github.com/nats-io/nats.go/jetstream"
)

// StreamConfig is what the mesh declares about its stream.
type StreamConfig struct {
	Name     string // default events.Stream
	Replicas int    // default 1; 3 on a NATS cluster
	// Duplicates is how long a command id is remembered, so a retry inside it
	// stores nothing. Default 2 minutes.
	Duplicates time.Duration
}

func (c StreamConfig) withDefaults() StreamConfig {
	if c.Name == "" {
		c.Name = events.Stream
	}
	if c.Replicas == 0 {
		c.Replicas = 1
	}
	if c.Duplicates == 0 {
		c.Duplicates = 2 * time.Minute
	}
	return c
}

// Assertion says what asserting the stream found and did, so a start can say it.
type Assertion struct {
	Action  string // "created", "updated", "unchanged"
	Changes []string
	State   State
}

func (a Assertion) String() string {
	s := fmt.Sprintf("stream %s %s: %d event(s), last sequence %d", a.State.Stream, a.Action, a.State.Msgs, a.State.LastSeq)
	if len(a.Changes) > 0 {
		s += fmt.Sprintf(" (%v)", a.Changes)
	}
	return s
}

// State is where the stream stands, and its identity: a stream is known by its
// name and creation time, so read models built from another stream of the same
// name (a restore, a reset bus) are recognised as not belonging to it.
type State struct {
	Stream   string
	Created  time.Time
	FirstSeq uint64
	LastSeq  uint64
	Msgs     uint64
}

// assertStream creates the stream or brings the settings the mesh owns back to
// what it declares. Settings it does not own are left as an operator set them,
// and data is never removed: removing data is a person's act.
// codeNoPeers: JetStream's "no suitable peers for placement". A cluster
// just started may answer it while its servers are still learning of each
// other (seen starting a 3-server cluster beside a loaded test suite).
const codeNoPeers = 10005

// placementFor bounds how long a stream's creation waits for the peers it
// must be placed on.
const placementFor = 15 * time.Second

// createStream creates the stream, waiting, briefly, for a new cluster's
// peers to know of each other.
func createStream(ctx context.Context, js jetstream.JetStream, want jetstream.StreamConfig) (jetstream.Stream, error) {
	deadline := time.Now().Add(placementFor)
	for {
		st, err := js.CreateStream(ctx, want)
		var apiErr *jetstream.APIError
		if err == nil || !errors.As(err, &apiErr) || apiErr.ErrorCode != codeNoPeers || time.Now().After(deadline) {
			return st, err
		}
		select {
		case <-ctx.Done():
			return st, err
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func assertStream(ctx context.Context, js jetstream.JetStream, c StreamConfig) (jetstream.Stream, Assertion, error) {
	want := jetstream.StreamConfig{
		Name:       c.Name,
		Subjects:   []string{events.SubjectsEvents, events.SubjectsReports},
		Storage:    jetstream.FileStorage,
		Retention:  jetstream.LimitsPolicy,
		Replicas:   c.Replicas,
		Duplicates: c.Duplicates,
		// Direct gets answer "last event of this aggregate" without a consumer.
		AllowDirect: true,
		// One decision's events land all or none.
		AllowAtomicPublish: true,
		// The log is the record: nothing through the API deletes from it.
		DenyDelete: true,
		DenyPurge:  true,
		// No event larger than an event may be (events.MaxEvent).
		MaxMsgSize: events.MaxEvent,
		// Each declaration, once stored, to its node's agent
		// (events.StoredPrefix): the leader republishes a message only
		// after it is stored (on a cluster, once a quorum has it).
		RePublish: storedRepublish(),
	}
	st, err := js.Stream(ctx, c.Name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		st, err = createStream(ctx, js, want)
		if err != nil {
			return nil, Assertion{}, fmt.Errorf("store: cannot create stream %s: %w", c.Name, err)
		}
		return st, Assertion{Action: "created", State: stateOf(st.CachedInfo())}, nil
	}
	if errors.Is(err, jetstream.ErrJetStreamNotEnabled) || errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount) {
		return nil, Assertion{}, fmt.Errorf("store: the bus has no JetStream, where the mesh keeps its log; run nats-server with JetStream enabled (-js), or use mesh up")
	}
	if err != nil {
		return nil, Assertion{}, fmt.Errorf("store: cannot look up stream %s: %w", c.Name, err)
	}
	have := st.CachedInfo().Config
	next, changes := merge(have, want)
	if len(changes) == 0 {
		return st, Assertion{Action: "unchanged", State: stateOf(st.CachedInfo())}, nil
	}
	st, err = js.UpdateStream(ctx, next)
	if err != nil {
		return nil, Assertion{}, fmt.Errorf("store: cannot update stream %s (%v): %w", c.Name, changes, err)
	}
	return st, Assertion{Action: "updated", Changes: changes, State: stateOf(st.CachedInfo())}, nil
}

// merge sets the fields the mesh owns on have and names each one it changed.
func merge(have, want jetstream.StreamConfig) (jetstream.StreamConfig, []string) {
	var changes []string
	next := have
	for _, s := range want.Subjects {
		if !slices.Contains(next.Subjects, s) {
			next.Subjects = append(next.Subjects, s)
			changes = append(changes, "subject "+s+" added")
		}
	}
	set := func(name string, dst *bool, v bool) {
		if *dst != v {
			*dst = v
			changes = append(changes, fmt.Sprintf("%s %v", name, v))
		}
	}
	set("allow_direct", &next.AllowDirect, true)
	set("allow_atomic", &next.AllowAtomicPublish, true)
	set("deny_delete", &next.DenyDelete, true)
	set("deny_purge", &next.DenyPurge, true)
	if next.Replicas != want.Replicas {
		changes = append(changes, fmt.Sprintf("replicas %d to %d", next.Replicas, want.Replicas))
		next.Replicas = want.Replicas
	}
	if next.RePublish == nil || *next.RePublish != *want.RePublish {
		changes = append(changes, fmt.Sprintf("republish %s to %s", want.RePublish.Source, want.RePublish.Destination))
		next.RePublish = want.RePublish
	}
	if next.MaxMsgSize != want.MaxMsgSize {
		changes = append(changes, fmt.Sprintf("max message size %d to %d", next.MaxMsgSize, want.MaxMsgSize))
		next.MaxMsgSize = want.MaxMsgSize
	}
	if next.Duplicates != want.Duplicates {
		changes = append(changes, fmt.Sprintf("duplicates window %s to %s", next.Duplicates, want.Duplicates))
		next.Duplicates = want.Duplicates
	}
	return next, changes
}

func stateOf(info *jetstream.StreamInfo) State {
	return State{
		Stream: info.Config.Name, Created: info.Created.UTC(),
		FirstSeq: info.State.FirstSeq, LastSeq: info.State.LastSeq, Msgs: info.State.Msgs,
	}
}

func storedRepublish() *jetstream.RePublish {
	src, dest := events.StoredRepublish()
	return &jetstream.RePublish{Source: src, Destination: dest}
}
