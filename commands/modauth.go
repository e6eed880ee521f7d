package commands

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/meshctl/mesh/compose"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/manifest"
	"github.com/meshctl/mesh/projections"
	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go/jetstream"
)

// ModulePermissions is all a running module's identity may do on the bus
// (issue 15), from its manifest: publish and answer on the services it
// provides, ask and hear the services it consumes, read and write its own
// state bucket, and report its own standing as a provider on its node.
// Nothing else: no other service, no stream, no other module's state, no
// consumer of the event stream, no other inbox.
//
// The holder of seats may also take work from each seat's queue (seats: the
// seats this instance holds now; a handover stops its program, which ends
// its connection, so a former holder does not keep the grant).
func ModulePermissions(node, module string, m manifest.Manifest, seats ...string) jwt.Permissions {
	bucket := events.StateBucket(module)
	kv := "KV_" + bucket
	pub := jwt.StringList{
		// Its standing, for itself on its node (the fold checks the
		// provider named is this module, signed by this identity).
		events.ReportSubject(node, events.ProviderFailing{}.EventType()),
		events.ReportSubject(node, events.ProviderRecovered{}.EventType()),
		// Its state: puts and deletes, and the API calls a key-value
		// bucket is read and watched with.
		"$KV." + bucket + ".>",
		"$JS.API.STREAM.INFO." + kv,
		"$JS.API.STREAM.MSG.GET." + kv,
		"$JS.API.DIRECT.GET." + kv,
		"$JS.API.DIRECT.GET." + kv + ".>",
		"$JS.API.CONSUMER.CREATE." + kv,
		"$JS.API.CONSUMER.CREATE." + kv + ".>",
		"$JS.API.CONSUMER.DELETE." + kv + ".>",
		"$JS.FC." + kv + ".>",
		"$JS.API.INFO",
	}
	pub = append(pub, seatGrants(seats)...)
	sub := jwt.StringList{events.ModuleInbox(node, module) + ".>"}
	for _, req := range m.Provides {
		pub = append(pub, events.ServiceSubjects(req))
		sub = append(sub, events.ServiceSubjects(req))
	}
	for _, req := range m.Consumes {
		pub = append(pub, events.ServiceSubjects(req))
		sub = append(sub, events.ServiceSubjects(req))
	}
	return jwt.Permissions{
		Pub: jwt.Permission{Allow: pub},
		Sub: jwt.Permission{Allow: sub},
		// Answering a request is publishing once to its reply subject.
		Resp: &jwt.ResponsePermission{MaxMsgs: 1},
	}
}

// moduleIdentity decides a connection that names itself NODE/MODULE: its
// key must be that module's on that node, the node active, and the
// module assigned there in a build that runs.
func (c *authCallout) moduleIdentity(pub, user string) (string, jwt.Permissions, error) {
	node, module, _ := strings.Cut(user, "/")
	if events.ValidateName("node", node) != nil || events.ValidateName("module", module) != nil {
		return "", jwt.Permissions{}, fmt.Errorf("%q is not a node and module (NODE/MODULE)", user)
	}
	want, _ := c.h.Keys.Module(node, module)
	if want != pub {
		return "", jwt.Permissions{}, fmt.Errorf("the key presented is not that of %s on %s; a module's key is its agent's to hand it", module, node)
	}
	var m manifest.Manifest
	var seats []string
	err := c.h.Proj.Read(func(v *projections.View) error {
		held, err := v.Seats()
		if err != nil {
			return err
		}
		for _, s := range held {
			if s.Node == node && s.Module == module && s.HandoverTo == "" {
				seats = append(seats, s.Seat)
			}
		}
		row, found, err := v.Node(node)
		switch {
		case err != nil:
			return err
		case !found || row.Retired:
			return fmt.Errorf("%s is not an active node of this mesh", node)
		}
		as, err := v.AssignmentsOf(node)
		if err != nil {
			return err
		}
		for _, a := range as {
			if a.Module != module {
				continue
			}
			got, found, err := c.h.manifests.get(v, compose.BuildRef{Module: a.Module, Build: a.Build})
			if err != nil || !found {
				return fmt.Errorf("the build of %s assigned to %s cannot be read", module, node)
			}
			if got.Run == nil {
				return fmt.Errorf("%s on %s does not run (its build has no run)", module, node)
			}
			m = got
			return nil
		}
		return fmt.Errorf("%s is not assigned to %s", module, node)
	})
	if err != nil {
		return "", jwt.Permissions{}, err
	}
	return user, ModulePermissions(node, module, m, seats...), nil
}

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
