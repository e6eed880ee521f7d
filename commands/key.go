package commands

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"github.com/meshctl/mesh/busauth"
	"github.com/meshctl/mesh/commands/core"
	"github.com/meshctl/mesh/declaration"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/events/store"
	"github.com/nats-io/nkeys"
)

// KeyFile is the controller's signing key in its home (busauth.KeyFile).
const KeyFile = busauth.KeyFile

// loadKey opens the controller's key, creating it on the first start of a
// mesh, and holds it to the key the log says the mesh signs with. A
// controller that cannot sign stops here, at its start, not at its first
// push (rule 1). Two first starts racing both find no key recorded, and
// one records its key: the other's append conflicts, and it reads the log
// again (decideAndAppend), where it finds the winner's key.
func loadKey(ctx context.Context, home string, st *store.Store) (nkeys.KeyPair, string, error) {
	var kp nkeys.KeyPair
	var pub string
	err := core.DecideAndAppend(ctx, "record", "the controller key", nil, func(int) (err error) {
		kp, pub, err = loadOrRecordKey(ctx, home, st)
		return err
	})
	return kp, pub, err
}

// loadOrRecordKey is one attempt of loadKey: store.ErrConflict when another
// start recorded a key between its read of the log and its append.
func loadOrRecordKey(ctx context.Context, home string, st *store.Store) (nkeys.KeyPair, string, error) {
	path := filepath.Join(home, KeyFile)
	recorded, version, err := recordedKey(ctx, st)
	if err != nil {
		return nil, "", err
	}
	// Created only for a mesh that has signed nothing yet.
	kp, err := busauth.HomeKey(home, recorded == "")
	if errors.Is(err, fs.ErrNotExist) {
		return nil, "", fmt.Errorf("the controller key %s is missing, but this mesh signs with %s and its nodes pinned that key; restore %s from a backup of the home", path, recorded, KeyFile)
	}
	if err != nil {
		return nil, "", err
	}
	pub, err := kp.PublicKey()
	if err != nil {
		return nil, "", fmt.Errorf("the controller key %s is not usable: %w", path, err)
	}
	switch {
	case recorded == pub:
	case recorded != "":
		return nil, "", fmt.Errorf("the controller key in %s is %s, but this mesh signs with %s; start the controller with the home that holds that key", path, pub, recorded)
	default:
		// Recorded once, expecting no record yet: two first starts racing
		// cannot both record a key. The record carries the MAC of the
		// key's log key, as every controller event does (rule 19).
		keys, err := declaration.NewKeyring(kp)
		if err != nil {
			return nil, "", err
		}
		st.MAC = keys.LogMAC()
		_, err = st.Append(ctx, events.ControllerAggregate(), version, "key-"+pub[:16], events.ControllerKeyRecorded{PublicKey: pub})
		if err != nil {
			return nil, "", err
		}
	}
	return kp, pub, nil
}

// recordedKey reads the controller key the log records (the first record
// that is one) and the version of the controller's aggregate. A message on
// the record's subject that is not a record (rule 19: a reply aimed into the
// stream, a stray writer's) is passed over, so it cannot stop a start.
func recordedKey(ctx context.Context, st *store.Store) (string, uint64, error) {
	// Direct gets first, never a consumer: the record is near the stream's
	// start and a start reads it before it serves (issue 34 point 4, ready
	// in 5 s; on ten million events the consumer's read cost a start 2 s).
	last, found, err := st.Last(ctx, events.ControllerAggregate().Filter())
	if err != nil {
		return "", 0, fmt.Errorf("cannot read the log's record of the controller key: %w", err)
	}
	if !found {
		return "", 0, nil
	}
	subject := events.ControllerAggregate().Subject(events.ControllerKeyRecorded{}.EventType())
	for from := uint64(1); from <= last.Seq; {
		m, found, err := st.Next(ctx, subject, from)
		if err != nil {
			return "", 0, fmt.Errorf("cannot read the log's record of the controller key: %w", err)
		}
		if !found || m.Seq > last.Seq {
			break
		}
		if _, ev, err := events.Read(m.Subject, m.Data); err == nil {
			return ev.(events.ControllerKeyRecorded).PublicKey, last.Seq, nil
		}
		from = m.Seq + 1
	}
	// No record found so: read the aggregate through one consumer, one
	// server's view. Two direct gets may be answered by two replicas, one
	// holding a record the other does not yet, and a version without its
	// record would let a start record a second key.
	return recordedKeyRead(ctx, st)
}

// recordedKeyRead is recordedKey by an ordered read of the aggregate.
func recordedKeyRead(ctx context.Context, st *store.Store) (string, uint64, error) {
	var key string
	var version uint64
	subject := events.ControllerAggregate().Subject(events.ControllerKeyRecorded{}.EventType())
	err := st.Read(ctx, store.ReadOptions{Filter: events.ControllerAggregate().Filter()}, func(m store.Msg) error {
		version = m.Seq
		if key != "" || m.Subject != subject {
			return nil
		}
		if _, ev, err := events.Read(m.Subject, m.Data); err == nil {
			key = ev.(events.ControllerKeyRecorded).PublicKey
		}
		return nil
	})
	if err != nil {
		return "", 0, fmt.Errorf("cannot read the log's record of the controller key: %w", err)
	}
	return key, version, nil
}
