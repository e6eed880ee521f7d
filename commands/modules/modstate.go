package modules

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/meshctl/mesh/commands/seats"
	"github.com/meshctl/mesh/compose"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/projections"
	"github.com/nats-io/nats.go/jetstream"
)

// A module's state bucket is bounded (issue 29: one module identity wrote
// 902 MB to its bucket in 5 s and made 60 durable consumers). The bus takes
// no rate per identity, only sizes, so these bound what a module can make
// the bus keep; a write past them is refused with the bus's own error
// ("maximum bytes exceeded", "maximum consumers limit reached"), to that
// module alone. A bucket is state to coordinate by (leases, a leader, small
// settings), not a store of data:
const (
	// StateMaxBytes is a bucket's whole size, every key's last value.
	StateMaxBytes = 64 << 20
	// StateMaxValue is one value: no more than the bus lets a module
	// publish at all (busauth's payload limit, events.MaxReport).
	StateMaxValue = events.MaxReport
	// StateMaxConsumers: an instance watches its bucket with one consumer
	// or two (a watch, a read of history), one instance a node; a module
	// on more than 500 nodes watching twice meets it, named by the bus.
	StateMaxConsumers = 1_000
)

// assertState makes the state bucket of a module that runs if it is not
// there, with the stream's replicas, and says which. A bucket is kept when
// nothing declares its module any more: state outlives a build. A bucket
// made before the bounds gets them.
func assertState(ctx context.Context, js jetstream.JetStream, replicas int, module string) (string, error) {
	bucket := events.StateBucket(module)
	action := "found"
	if _, err := js.KeyValue(ctx, bucket); errors.Is(err, jetstream.ErrBucketNotFound) {
		_, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: bucket, Description: "the state of module " + module + ", which its running instances read and write",
			Storage: jetstream.FileStorage, Replicas: max(replicas, 1), History: 1, MaxBytes: StateMaxBytes, MaxValueSize: StateMaxValue})
		if err != nil {
			return "", fmt.Errorf("cannot create the state bucket %s of %s: %w", bucket, module, err)
		}
		action = "created"
	} else if err != nil {
		return "", fmt.Errorf("cannot assert the state bucket %s of %s: %w", bucket, module, err)
	}
	// The consumers' bound is the stream's, which a bucket's config does
	// not carry: set on the stream under it, at creation and after.
	stream, err := js.Stream(ctx, "KV_"+bucket)
	if err != nil {
		return "", fmt.Errorf("cannot read the stream of state bucket %s: %w", bucket, err)
	}
	cfg := stream.CachedInfo().Config
	if cfg.MaxBytes == StateMaxBytes && cfg.MaxMsgSize == StateMaxValue && cfg.MaxConsumers == StateMaxConsumers {
		return action, nil
	}
	cfg.MaxBytes, cfg.MaxMsgSize, cfg.MaxConsumers = StateMaxBytes, StateMaxValue, StateMaxConsumers
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		return "", fmt.Errorf("cannot bound the state bucket %s of %s: %w", bucket, module, err)
	}
	if action == "found" {
		action = "found, bounded now"
	}
	return action, nil
}

// AssertStreams asserts, at a start, the state bucket of every
// module whose latest build runs and the work queue of every seat a
// registered build claims (a seat's queue keeps work before anyone ever
// held it), from one pass over the modules, and says what it found: a line
// for the buckets, one for the queues.
func (h *Service) AssertStreams(ctx context.Context, replicas int) ([]string, error) {
	var running []string
	claimed := map[string]bool{}
	err := h.Proj.Read(func(v *projections.View) error {
		rows, err := v.Modules()
		if err != nil {
			return err
		}
		for _, row := range rows {
			for _, b := range row.Builds {
				m, found, err := h.world.Manifest(v, compose.BuildRef{Module: row.Name, Build: b.Build})
				if err != nil {
					return err
				}
				if found && b.Build == row.Latest && m.Run != nil {
					running = append(running, row.Name)
				}
				for _, s := range m.Claims {
					claimed[s] = true
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	js := h.Store.JetStream()
	buckets, err := sayAsserted("state buckets", "no module runs yet", running, func(module string) (string, string, error) {
		action, err := assertState(ctx, js, replicas, module)
		return events.StateBucket(module), action, err
	})
	if err != nil {
		return nil, err
	}
	queues, err := sayAsserted("seat work queues", "no module claims a seat yet", slices.Sorted(maps.Keys(claimed)), func(seat string) (string, string, error) {
		action, err := seats.AssertSeatQueue(ctx, js, replicas, seat)
		return events.SeatStream(seat), action, err
	})
	return []string{buckets, queues}, err
}

// sayAsserted asserts each of names and says in one line, headed what,
// what each assertion found (none when there are no names).
func sayAsserted(what, none string, names []string, assert func(string) (stream, action string, err error)) (string, error) {
	if len(names) == 0 {
		return what + ": " + none, nil
	}
	said := make([]string, 0, len(names))
	for _, name := range names {
		stream, action, err := assert(name)
		if err != nil {
			return "", err
		}
		said = append(said, stream+" "+action)
	}
	return what + ": " + strings.Join(said, ", "), nil
}
