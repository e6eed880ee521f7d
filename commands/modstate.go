package commands

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/meshctl/mesh/compose"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/projections"
	"github.com/nats-io/nats.go/jetstream"
)

// assertState makes the state bucket of a module that runs if it is not
// there, with the stream's replicas, and says which. A bucket is kept when
// nothing declares its module any more: state outlives a build.
func assertState(ctx context.Context, js jetstream.JetStream, replicas int, module string) (string, error) {
	bucket := events.StateBucket(module)
	if _, err := js.KeyValue(ctx, bucket); err == nil {
		return "found", nil
	} else if !errors.Is(err, jetstream.ErrBucketNotFound) {
		return "", fmt.Errorf("cannot assert the state bucket %s of %s: %w", bucket, module, err)
	}
	_, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: bucket, Description: "the state of module " + module + ", which its running instances read and write",
		Storage: jetstream.FileStorage, Replicas: max(replicas, 1), History: 1})
	if err != nil {
		return "", fmt.Errorf("cannot create the state bucket %s of %s: %w", bucket, module, err)
	}
	return "created", nil
}

// assertStates asserts the state bucket of every module whose latest build
// runs, and says what it found.
func (h *Handlers) assertStates(ctx context.Context, replicas int) (string, error) {
	var running []string
	err := h.Proj.Read(func(v *projections.View) error {
		rows, err := v.Modules()
		if err != nil {
			return err
		}
		for _, row := range rows {
			m, found, err := h.manifests.get(v, compose.BuildRef{Module: row.Name, Build: row.Latest})
			if err == nil && found && m.Run != nil {
				running = append(running, row.Name)
			}
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	var said []string
	for _, module := range running {
		action, err := assertState(ctx, h.Store.JetStream(), replicas, module)
		if err != nil {
			return "", err
		}
		said = append(said, events.StateBucket(module)+" "+action)
	}
	if len(said) == 0 {
		return "state buckets: no module runs yet", nil
	}
	return "state buckets: " + strings.Join(said, ", "), nil
}
